#pragma once

// The parent side of a soak job in the test: forks the ranks (each runs run_soak_rank), then
// hosts the job's store, waits for every rank with a deadline, and collects what the test
// checks: each rank's exit status and report, when the victim died and when the last survivor
// left, and whatever the job left behind (processes, /dev/shm entries, System V segments).
//
// The parent is a child subreaper (prctl PR_SET_CHILD_SUBREAPER), so any process a rank started
// and left behind is re-parented to it when the rank exits and shows up as a leftover child.

#include "soak_rank.hpp"

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include <sys/types.h>

namespace cohort::soak::test {

struct JobResult {
  /// Per rank: exit code, or -signal when a signal ended it.
  std::vector<int> exit_statuses;
  /// Per rank: the report it published in the store, or empty when it published none.
  std::vector<std::string> reports;
  std::vector<pid_t> pids;
  /// From the victim's death to the last survivor's exit (runs with a kill only).
  std::optional<std::chrono::milliseconds> survivors_left_after;
  /// Whole job, fork to last exit.
  std::chrono::milliseconds duration{0};
  /// Processes found after every rank was reaped ("pid <p>": still running or a zombie).
  std::vector<std::string> leftover_processes;
  /// /dev/shm entries named cohort* or ucx* that appeared during the job and are still there,
  /// held by no live process (an entry some other running program holds is not the job's).
  std::vector<std::string> leftover_shm;
  /// System V shared-memory segments created by a rank of the job and still there.
  std::vector<std::string> leftover_sysv_shm;
};

/// Runs a job of `ranks` ranks with `options` and returns once every rank has exited and been
/// reaped. Throws std::runtime_error when a rank is still running at `deadline` (every rank is
/// then killed and reaped).
JobResult run_soak_job(int ranks, const SessionOptions& options, std::chrono::seconds deadline);

}  // namespace cohort::soak::test
