#pragma once

// One rank's whole part in a soak job, shared by cohort-soak and the soak test: run the plan,
// judge the outcome, publish a one-line report in the job's store, and, when a rank was killed,
// leave only once every survivor is done (a survivor that exits early turns the others' waits on
// it into errors that are not the ones under test, and UCX 1.13 may abort a process reading
// shared memory whose owner has gone).

#include "soak_runner.hpp"

#include <cohort/communicator.hpp>
#include <cohort/store.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <ostream>
#include <string>

namespace cohort::soak {

/// The store key under which rank r publishes its report ("<prefix><r>").
inline constexpr const char* kReportKeyPrefix = "cohort-soak/report/";

/// A poisoned communicator must refuse an op within this long.
inline constexpr std::chrono::milliseconds kFollowupBound{2000};

struct SessionOptions {
  SoakOptions soak;
  /// Rank 0 prints a progress line each time this many more ops have been drawn (0: never).
  std::uint64_t progress_every = 0;
  /// Print the op mix after the run (rank 0).
  bool print_mix = true;
};

/// Empty when `outcome` is what rank `rank` must end with under `options`; else why not. Clean
/// runs must end without error; a survivor of a kill must have failed at or after the kill's op
/// with RemoteError or Timeout, and its failed communicator must have refused the next op with
/// InvalidUsage within kFollowupBound.
std::string judge(const RankOutcome& outcome, const SoakOptions& options, int rank);

/// Runs the soak on `world`, whose ranks share `store`; progress and the verdict go to `log`.
/// Returns the process exit code: 0 when the rank passed, 1 otherwise.
int run_session(const std::shared_ptr<Communicator>& world, Store& store,
                const SessionOptions& options, std::ostream& log);

}  // namespace cohort::soak
