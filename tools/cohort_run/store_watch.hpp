#pragma once

// The launcher's store calls during supervision, made on a thread of their own. node 0's store
// can go silent (its host froze, its link dropped) without closing the connection; a store call
// on the supervisor's thread would then stall the one loop that reaps ranks, echoes their output,
// stops them and takes Ctrl-C, for as long as the call's deadline. Here the supervisor only asks
// and reads: the thread publishes this node's abort when asked, polls for another node's on a
// job of several nodes, and records what it learned.

#include "cohort_run/launcher_store.hpp"

#include <chrono>
#include <memory>
#include <optional>
#include <string>

namespace cohort::run {

class JobStoreWatch {
 public:
  /// Starts the thread; call with the interrupt signals blocked (BlockedInterrupts) so they stay
  /// with the supervisor. `poll_remote`: look for another launcher's abort every `interval`.
  /// `store_name` ("addr:port") is for messages.
  JobStoreWatch(std::shared_ptr<LauncherStore> store, bool poll_remote,
                std::chrono::milliseconds interval, std::string store_name);
  /// Stops the thread: joins it when it is between calls or finishes its call within a second;
  /// otherwise (a store call to a silent node 0, bounded by the client's io_timeout) leaves it
  /// to end on its own, holding what it uses, so the launcher's exit never waits for it.
  ~JobStoreWatch();
  JobStoreWatch(const JobStoreWatch&) = delete;
  JobStoreWatch& operator=(const JobStoreWatch&) = delete;

  /// Asks the thread to publish `abort`; only the first request counts. Returns at once.
  void publish(JobAbort abort);

  /// Why the job must stop, if it must: another node's abort, or a store that stopped answering.
  /// Returns at once.
  std::optional<std::string> stop_reason();

  /// How the job ended, as far as the store says: after publish(), the job's first abort (ours,
  /// or another node's that came first); without one, another node's abort if one was seen.
  /// When the store was lost the requested abort stands and `store_error` says why. `pending`
  /// while the publication is still on its way after waiting at most `wait` (ask again).
  struct Settled {
    bool pending = false;
    std::optional<JobAbort> abort;
    std::optional<std::string> store_error;
  };
  Settled settle(std::chrono::milliseconds wait);

 private:
  struct State;  // shared with the thread, which may outlive the watch
  std::shared_ptr<State> state_;
};

}  // namespace cohort::run
