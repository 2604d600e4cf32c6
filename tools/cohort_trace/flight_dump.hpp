#pragma once

// Reading the flight records the ranks dump (lib/comm/flight_recorder.hpp writes them): one JSON
// file per rank and communicator, "cohort-trace.<job>.comm<id>.rank<r>.json". The fields:
//
//   format "cohort-flight-record", version 1
//   job, pid, host               which process wrote it (job: the launcher's id, may be empty)
//   communicator, rank, size     which communicator and rank
//   reason                       "failure" | "signal" | "request"
//   dumped_at_us                 wall clock, microseconds since the epoch
//   capacity, recorded           ring size, and collectives ever recorded (more: some dropped)
//   failure                      null, or {code, message, op, name, sequence, peers, to_rank,
//                                from_rank, tag}: what poisoned it (op: the bare name, "send";
//                                name: "send #3 to rank 1 (tag 7)"; sequence: the op's number,
//                                counted apart for collectives and for sends/receives)
//   ops                          oldest first: {seq, op, dtype, reduce_op, count, root,
//                                algorithm, state, timeout_ms, queued_us, started_us,
//                                finished_us, awaited_peers}; unknown values are null
//
// state is "queued" (called, waiting behind earlier ops), "started", "done" or "failed".

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cohort::trace {

enum class OpState { Queued, Started, Done, Failed };

/// One collective as a rank recorded it.
struct RecordedOp {
  std::uint32_t seq = 0;
  std::string op;  ///< "allreduce", "broadcast", ... (cohort's collective names)
  std::optional<std::string> dtype;
  std::optional<std::string> reduce_op;
  std::uint64_t count = 0;
  std::optional<int> root;
  std::optional<std::string> algorithm;
  OpState state = OpState::Queued;
  std::int64_t timeout_ms = 0;
  std::optional<std::int64_t> queued_us, started_us, finished_us;
  std::vector<int> awaited_peers;
};

/// What poisoned the communicator on that rank.
struct RecordedFailure {
  std::string code;  ///< "timeout", "remote_error", ...
  std::string message;
  std::string op;    ///< the bare name: "allreduce", "send", ... (empty: no op)
  std::string name;  ///< "send #3 to rank 1 (tag 7)"; `op` when the record has none
  std::optional<std::uint32_t> sequence;
  std::vector<int> peers;
};

/// One rank's dump of one communicator.
struct RankDump {
  std::string source;  ///< where it was read from, for messages
  std::string job;
  long pid = 0;
  std::string host;
  std::uint32_t communicator = 0;
  int rank = 0;
  int size = 1;
  std::string reason;
  std::int64_t dumped_at_us = 0;
  std::uint64_t capacity = 0;
  std::uint64_t recorded = 0;
  std::optional<RecordedFailure> failure;
  std::vector<RecordedOp> ops;  ///< oldest first
};

/// Parses one dump. Throws Error(InvalidArgument) naming `source` and the field when the text is
/// not JSON, not a version-1 flight record, or a field has the wrong type.
RankDump parse_dump(std::string_view text, const std::string& source);

/// The dumps found at `paths`: files are read as dumps, directories are searched (not
/// recursively) for "cohort-trace.*.json". With `newer_than`, files last written before it are
/// skipped (a shared trace directory holds earlier jobs' dumps too). Files that cannot be read
/// or parsed are described in `problems` and skipped.
std::vector<RankDump> read_dumps(
    const std::vector<std::filesystem::path>& paths, std::vector<std::string>& problems,
    std::optional<std::filesystem::file_time_type> newer_than = std::nullopt);

/// "queued", "started", "done", "failed".
std::string_view state_name(OpState state) noexcept;

}  // namespace cohort::trace
