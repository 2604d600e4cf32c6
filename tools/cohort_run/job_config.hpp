#pragma once

// What cohort-run was asked to do, as parsed from its command line.

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace cohort::run {

struct JobConfig {
  int nproc_per_node = 1;
  int nnodes = 1;
  int node_rank = 0;
  /// Where node 0's store listens (node 0 binds it; other nodes connect to it).
  std::string master_addr = "127.0.0.1";
  /// 0: node 0 picks a free port (single-node jobs only; other nodes must be told the port).
  std::uint16_t master_port = 0;
  /// One node, a free port and a fresh token, whatever the environment says.
  bool standalone = false;
  /// When set, rank<N>.out / rank<N>.err are written here as well as to the terminal.
  std::string log_dir;
  bool tag_output = true;
  std::chrono::milliseconds grace{std::chrono::seconds(10)};
  /// Extra variables for every rank (given as --env K=V), applied last.
  std::vector<std::pair<std::string, std::string>> extra_env;
  /// How long a launcher waits for an answer from the job's store (node 0) before it takes the
  /// store as lost and stops its ranks.
  std::chrono::milliseconds store_timeout{std::chrono::seconds(60)};
  /// Whole-job limit; none when unset.
  std::optional<std::chrono::milliseconds> timeout;
  /// The program and its arguments.
  std::vector<std::string> command;

  int world_size() const { return nnodes * nproc_per_node; }
};

/// Parses argv. Prints help/errors itself; returns the exit code to use when the program should
/// exit right away (help, bad usage), otherwise fills `config` and returns nullopt.
std::optional<int> parse_command_line(int argc, char** argv, JobConfig& config);

}  // namespace cohort::run
