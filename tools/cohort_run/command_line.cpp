#include "cohort_run/job_config.hpp"

#include <cohort/work.hpp>

#include <CLI/CLI.hpp>

#include <cmath>
#include <iostream>

namespace cohort::run {
namespace {

// At most a year, as every deadline cohort accepts (kMaxTimeout): a deadline is a clock reading
// plus the duration, which must stay in range.
constexpr double kMaxSeconds = static_cast<double>(kMaxTimeout.count()) / 1000.0;

std::chrono::milliseconds seconds_to_millis(double seconds) {
  return std::chrono::milliseconds(static_cast<long long>(std::llround(seconds * 1000.0)));
}

}  // namespace

std::optional<int> parse_command_line(int argc, char** argv, JobConfig& config) {
  CLI::App app{
      "cohort-run [options] -- program [args...]\n\nStarts a cohort job. Runs N copies of a "
      "program on this node with rank "
      "variables set (COHORT_*, and torchrun's RANK, WORLD_SIZE, ...), hosts the rendezvous "
      "store on node 0, tags output with the rank, and stops the whole job when one rank fails.",
      "cohort-run"};
  // Everything from the first positional on (or after "--") is the program's command line.
  app.prefix_command();

  double grace_seconds = 10.0;
  double timeout_seconds = 0.0;
  double store_timeout_seconds = 60.0;
  int master_port = 0;
  std::vector<std::string> env_pairs;

  app.add_option("-n,--nproc-per-node", config.nproc_per_node, "ranks to start on this node")
      ->check(CLI::Range(1, 4096));
  app.add_option("--nnodes", config.nnodes, "number of nodes (one cohort-run each)")
      ->check(CLI::Range(1, 65536));
  app.add_option("--node-rank", config.node_rank, "this node's index, 0 .. nnodes-1")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--master-addr", config.master_addr,
                 "address of node 0, where the store listens (default 127.0.0.1)");
  app.add_option("--master-port", master_port, "store port on node 0 (0: pick a free one)")
      ->check(CLI::Range(0, 65535));
  app.add_flag("--standalone", config.standalone,
               "single node on a free port with a fresh token, ignoring COHORT_TOKEN");
  app.add_option("--log-dir", config.log_dir,
                 "also write each rank's output to DIR/rank<N>.out and DIR/rank<N>.err");
  app.add_flag("--tag-output,!--no-tag-output", config.tag_output,
               "prefix every output line with [rank N] (default on)");
  app.add_option("--grace", grace_seconds,
                 "seconds between SIGTERM and SIGKILL when stopping ranks (default 10)")
      ->check(CLI::Range(0.0, kMaxSeconds));
  app.add_option("--env", env_pairs, "K=V: set a variable for every rank (repeatable)")
      ->type_name("K=V")
      ->each([](const std::string& pair) {
        if (pair.find('=') == std::string::npos || pair.front() == '=') {
          throw CLI::ValidationError("--env", "expected K=V, got '" + pair + "'");
        }
      });
  app.add_option("--timeout", timeout_seconds,
                 "stop the whole job after this many seconds (exit code 124)")
      ->check(CLI::PositiveNumber & CLI::Range(0.0, kMaxSeconds));
  app.add_option("--store-timeout", store_timeout_seconds,
                 "seconds to wait for an answer from node 0's store before stopping this node's "
                 "ranks as cut off from the job (default 60; at least 1; the launcher's store "
                 "calls use it instead of COHORT_STORE_TIMEOUT)")
      ->check(CLI::Range(1.0, kMaxSeconds));

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version exit 0; every refused argument 2, as for the checks below (CLI11's
    // own codes, 105 for a value out of range, say nothing a shell script can rely on).
    return app.exit(e) == 0 ? 0 : 2;
  }

  config.command = app.remaining();
  if (!config.command.empty() && config.command.front() == "--") {
    config.command.erase(config.command.begin());
  }
  if (config.command.empty()) {
    std::cerr << "cohort-run: no program given\n" << app.help();
    return 2;
  }
  if (config.node_rank >= config.nnodes) {
    std::cerr << "cohort-run: --node-rank " << config.node_rank << " is out of range for --nnodes "
              << config.nnodes << " (expected 0 .. " << config.nnodes - 1 << ")\n";
    return 2;
  }
  if (config.standalone && (config.nnodes != 1 || config.node_rank != 0)) {
    std::cerr << "cohort-run: --standalone runs one node; it cannot be combined with --nnodes "
              << config.nnodes << " / --node-rank " << config.node_rank << "\n";
    return 2;
  }
  if (config.nnodes > 1 && master_port == 0) {
    std::cerr << "cohort-run: --nnodes " << config.nnodes
              << " needs --master-port: every node's launcher must know where node 0's store "
                 "listens\n";
    return 2;
  }
  config.master_port = static_cast<std::uint16_t>(master_port);
  config.grace = seconds_to_millis(grace_seconds);
  if (timeout_seconds > 0) config.timeout = seconds_to_millis(timeout_seconds);
  config.store_timeout = seconds_to_millis(store_timeout_seconds);
  for (const std::string& pair : env_pairs) {
    const std::size_t eq = pair.find('=');
    config.extra_env.emplace_back(pair.substr(0, eq), pair.substr(eq + 1));
  }
  if (config.standalone) {
    config.master_addr = "127.0.0.1";
    config.master_port = 0;
  }
  return std::nullopt;
}

}  // namespace cohort::run
