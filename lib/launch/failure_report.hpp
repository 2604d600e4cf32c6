#pragma once

// Words for a failed job: the message cohort::launch() throws, the summary cohort-run prints,
// and the record a node's launcher publishes in the store so the other nodes' launchers can
// print the same summary.

#include "launch/rank_supervisor.hpp"

#include <optional>
#include <string>
#include <vector>

namespace cohort::launcher {

/// "rank 1 of 3 (local rank 1, node 0, pid 4242) failed with exit code 7; stopped ranks 0, 2;
/// last stderr lines of rank 1:\n    ..." (the stderr part only when there is some).
std::string describe_failure(const RankFailure& failure, int world_size,
                             const std::vector<int>& stopped_ranks);

/// cohort-run's end-of-job summary block (several lines, newline-terminated). `this_node` is
/// the node printing it; `stopped_ranks`/`killed_ranks` are that node's. `trace_lines` (the
/// flight records' verdict, may be empty) come last before the exit code, one per line.
std::string failure_summary(const RankFailure& failure, int world_size, int this_node,
                            const std::vector<int>& stopped_ranks,
                            const std::vector<int>& killed_ranks,
                            const std::vector<std::string>& trace_lines = {});

/// Serialises a failure for the store (line-oriented text, stderr tail last).
std::string encode_failure(const RankFailure& failure);
/// The inverse of encode_failure; nullopt when `text` is not such a record.
std::optional<RankFailure> decode_failure(const std::string& text);

}  // namespace cohort::launcher
