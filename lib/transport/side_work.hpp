#pragma once

// SideWork: what the thread driving a communicator does for that communicator between the
// polling rounds of whatever wait it is in.
//
// One thread drives a communicator's transport at a time, and an op holds the drive until it
// ends. A collective can wait for a long time on a peer; sends and receives called meanwhile
// (by another thread, or queued behind an *_async collective) are posted and completed by the
// driver only. If the peer is itself waiting for one of those transfers before it joins the
// collective (a pipeline stage's send; MPI_Iallreduce followed by MPI_Recv), the two ranks would
// wait for each other until a deadline. MPI's progress rule answers this: any wait advances
// every outstanding operation. Here the executor asks (request()) and the transport's and the
// arena's waits answer between rounds (serve_if_asked()), on the driving thread.
//
// Thread-safety: request() from any thread; serve_if_asked() only by the driver, which is the
// only thread that waits on the communicator's transport and arena.

#include <atomic>

namespace cohort::transport {

/// Whether the wait that serves drives the transport itself (a UCX wait's rounds make worker
/// progress) or only watches memory (a shared-arena wait), where the side work's own polls are
/// all that moves its transfers.
enum class WaitKind { DrivesTransport, WatchesMemory };

class SideWork {
 public:
  using Serve = void (*)(void* context, WaitKind wait) noexcept;
  SideWork(Serve serve, void* context) noexcept : serve_(serve), context_(context) {}
  SideWork(const SideWork&) = delete;
  SideWork& operator=(const SideWork&) = delete;

  /// Any thread: the next round of the driver's wait calls the serve function. Requests made
  /// while it runs are answered by the round after.
  void request() noexcept { asked_.store(true, std::memory_order_release); }

  /// The driver, between polling rounds: serves if asked since the last time. One load when not
  /// asked (every round of every wait pays it). Not reentrant: a wait inside the serve function
  /// itself does not serve again.
  void serve_if_asked(WaitKind wait) noexcept {
    if (!asked_.load(std::memory_order_relaxed)) [[likely]]
      return;
    if (serving_) return;
    if (!asked_.exchange(false, std::memory_order_acquire)) return;
    serving_ = true;
    serve_(context_, wait);
    serving_ = false;
  }

 private:
  Serve serve_;
  void* context_;
  std::atomic<bool> asked_{false};
  bool serving_ = false;  ///< driver only
};

}  // namespace cohort::transport
