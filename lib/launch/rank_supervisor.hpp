#pragma once

// Watches the local ranks of a job until they all exit: pumps their output, reaps them, and on
// the first failure (or a timeout, a forwarded signal, or a stop requested from outside, e.g.
// another node's failure) stops every rank still running: SIGTERM to its process group, then
// SIGKILL once the grace period is over. A rank that still cannot be reaped some seconds after
// SIGKILL (stuck in the kernel) is left behind rather than waited for without end.
// Single-threaded: one poll() loop does everything.

#include "launch/child_process.hpp"
#include "launch/output_stream.hpp"

#include <chrono>
#include <csignal>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace cohort::launcher {

/// One local rank under supervision.
struct RankProcess {
  int rank = 0;
  int local_rank = 0;
  ChildProcess process;
  OutputStream out;
  OutputStream err;
};

/// The first rank that failed on its own (not because we stopped it).
struct RankFailure {
  int rank = 0;
  int local_rank = 0;
  int node_rank = 0;
  long pid = 0;
  ExitStatus status;
  std::vector<std::string> stderr_tail;
};

enum class JobOutcome {
  Success,        ///< every rank exited 0
  RankFailed,     ///< a local rank failed; see RankSupervisorResult::failure
  Interrupted,    ///< the launcher got SIGINT/SIGTERM and forwarded it
  StopRequested,  ///< SupervisorHooks::should_stop asked us to stop (e.g. another node failed)
  TimedOut,       ///< the job's deadline passed
};

/// SIGUSR1 and SIGUSR2 to the launcher are the application's (a checkpoint warning, a
/// flight-record request): passed to the running ranks, they never stop the job.
inline bool passed_to_ranks(int signal) noexcept {
  return signal == SIGUSR1 || signal == SIGUSR2;
}

struct SupervisorHooks {
  /// Readable when the launcher caught a signal; each byte read is a signal number to forward.
  /// SIGUSR1 and SIGUSR2 are passed to every running rank's own process (a checkpoint warning,
  /// a flight-record dump) and the job goes on; any other stops the job (see JobOutcome).
  int interrupt_fd = -1;
  /// When set, the job is stopped as TimedOut once this passes.
  std::optional<std::chrono::steady_clock::time_point> deadline;
  /// Between SIGTERM and SIGKILL when stopping.
  std::chrono::milliseconds grace{std::chrono::seconds(10)};
  /// Polled about every `stop_poll_interval` until a stop begins; a returned reason stops the
  /// job as StopRequested. Must not throw (convert failures into a reason).
  std::function<std::optional<std::string>()> should_stop;
  std::chrono::milliseconds stop_poll_interval{100};
  /// Called once, right when the first local failure is seen and before the others are
  /// signalled (publish it so other nodes start stopping in parallel). Must not throw.
  std::function<void(const RankFailure&)> on_first_failure;
  /// The launcher is a child subreaper (PR_SET_CHILD_SUBREAPER): reap every child with
  /// waitpid(-1), so descendants orphaned by a dying rank never linger as zombies, and at the end
  /// wait (briefly) for the group members killed last.
  bool reap_orphans = false;
};

struct RankSupervisorResult {
  JobOutcome outcome = JobOutcome::Success;
  std::optional<RankFailure> failure;
  /// Ranks still running when the stop began (they were signalled), ascending.
  std::vector<int> stopped_ranks;
  /// Ranks that needed SIGKILL because they outlived the grace period.
  std::vector<int> killed_ranks;
  /// Ranks that could not be reaped within ChildProcess::kReapAfterKillWait of SIGKILL (asleep
  /// uninterruptibly in the kernel, e.g. in a device driver): left behind, each logged with its
  /// pid and state; their statuses read as killed by SIGKILL.
  std::vector<int> abandoned_ranks;
  /// The signal forwarded for Interrupted, the reason given for StopRequested.
  int interrupt_signal = 0;
  std::string stop_reason;
  /// Every rank's exit status, indexed like the ranks passed in.
  std::vector<ExitStatus> statuses;
};

/// Supervises `ranks` until every one is reaped (see the top of this file). `node_rank` goes
/// into RankFailure. Process groups of all ranks are SIGKILLed at the end, so nothing a rank
/// left running in its group survives the job.
RankSupervisorResult supervise_ranks(std::vector<RankProcess>& ranks, int node_rank,
                                     const SupervisorHooks& hooks);

/// "0, 2, 5" (for reports).
std::string join_ranks(const std::vector<int>& ranks);

}  // namespace cohort::launcher
