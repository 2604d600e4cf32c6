#pragma once

// One child process of the launcher, owned by a move-only handle. Every child leads its own
// process group (so stopping a rank also stops whatever it spawned, and what it leaves in the
// group when it ends is killed as it is reaped), reads stdin from
// /dev/null, writes stdout/stderr into pipes the launcher drains, and dies with the launcher
// (PR_SET_PDEATHSIG). The handle's destructor kills and reaps a child still running, so no
// zombie or orphan survives an exception in the launcher.

#include "launch/exit_status.hpp"
#include "launch/pipes.hpp"

#include <chrono>
#include <functional>
#include <optional>
#include <span>
#include <string>

#include <sys/types.h>

namespace cohort::launcher {

class ChildProcess {
 public:
  ChildProcess() noexcept = default;
  explicit ChildProcess(pid_t pid) noexcept : pid_(pid) {}
  ~ChildProcess();

  ChildProcess(ChildProcess&& other) noexcept;
  ChildProcess& operator=(ChildProcess&& other) noexcept;
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const noexcept { return pid_; }
  /// True until the child has been reaped.
  bool running() const noexcept { return pid_ > 0 && !status_; }
  /// Set once reaped.
  const std::optional<ExitStatus>& status() const noexcept { return status_; }

  /// Sends `signal` to the child's process group (the child and everything it started that
  /// stayed in the group). Does nothing once the child was reaped (its pid, the group's id, may
  /// name another group by then). Returns whether anything got it.
  bool signal_group(int signal) noexcept;
  /// Sends `signal` to the child's process alone. Does nothing once it was reaped. Returns
  /// whether it got it.
  bool signal(int signal) noexcept;
  /// If the child has exited: SIGKILLs what it left in its group (while its zombie still holds
  /// the group's id), reaps it, records and returns its status. Otherwise nothing.
  std::optional<ExitStatus> try_reap();
  /// Gives up on a child that was sent SIGKILL yet cannot be reaped (asleep uninterruptibly in
  /// the kernel, e.g. in a device driver, or held by a tracer): from now on the handle counts it
  /// as killed by SIGKILL and the launcher never waits for it. A helper thread reaps it when it
  /// finally dies, so it does not stay a zombie for as long as the launcher (an application
  /// calling cohort::launch()) runs.
  void abandon() noexcept;

  /// How long a child may take to become reapable after SIGKILL before it is given up on.
  static constexpr std::chrono::seconds kReapAfterKillWait{10};

 private:
  void kill_and_reap() noexcept;

  pid_t pid_ = -1;
  std::optional<ExitStatus> status_;
};

/// What /proc says about process `pid`, for a report: "state D: uninterruptible sleep, in
/// <kernel function>", "state Z: ...", or that it is unknown.
std::string describe_process_state(pid_t pid);

/// A freshly forked child and the parent's (non-blocking) ends of its output pipes.
struct SpawnedChild {
  ChildProcess process;
  UniqueFd stdout_read;
  UniqueFd stderr_read;
};

/// Forks a child set up as described at the top of this file, then runs `body` in it and
/// `_exit`s with its return value (an escaping exception becomes exit code 1, its message on
/// stderr). `body` never returns into the caller. `close_in_child` lists parent descriptors
/// the child must not keep (other ranks' pipes: they would delay their EOF).
///
/// When the parent has other threads, `body` must only do async-signal-safe work (exec);
/// prepare argument vectors before calling this.
SpawnedChild fork_child(const std::function<int()>& body, std::span<const int> close_in_child = {});

}  // namespace cohort::launcher
