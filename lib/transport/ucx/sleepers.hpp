#pragma once

// Sleepers: the threads asleep in one hub's waits, each on a descriptor of its own.
//
// A thread that finds nothing to do for a while sleeps in poll() until UCX reports an event or
// another thread wakes it: progress that may have completed its requests, side work queued for
// it, an abort. With one eventfd shared by all sleepers, whichever woke first drained it, and a
// thread that had counted itself asleep but not yet reached poll() then slept its whole nap
// (transport::kMaxBlock) with the work it was woken for waiting. Here every sleeping thread
// listens on an eventfd of its own, which only that thread drains.
//
// Protocol, against lost wake-ups: a sleeper drains its descriptor, add()s it, and only then
// looks once more at whatever a waker changes before waking (the hub's progress epoch, its count
// of wake-ups). A waker changes that first, then calls wake_all(): either its wake_all() comes
// after add() and writes to the sleeper's descriptor, or it came before, and the sleeper's last
// look sees the change. A waker may skip wake_all() when any() is false only while it holds the
// lock under which sleepers add() themselves and look (the hub's progress does); one that does
// not hold it (UcxHub::wake_sleepers) must always call it.
//
// Thread-safety: everything from any thread; a descriptor is add()ed and remove()d by its own
// thread only. The list's lock is taken last: under it only the descriptors' writes run (and the
// logger, when one fails).
//
// After fork() a child's list still names the parent's sleeping threads (their descriptors are
// the child's copies); a hub is not used across fork() (UCX does not support it), and a child's
// own threads make descriptors of their own.

#include <atomic>
#include <mutex>
#include <vector>

namespace cohort::transport::ucx {

class Sleepers {
 public:
  /// The calling thread's descriptor, made on its first sleep in this process (a forked child
  /// makes its own) and closed when the thread ends; -1 when the system refused one (the
  /// caller then naps briefly instead of waiting to be woken). Drained: what an earlier wake-up
  /// left in it is gone.
  static int own_drained_fd() noexcept;

  /// Counts `fd` among the sleepers (its owner thread, before its last look). Throws
  /// std::bad_alloc only.
  void add(int fd);
  /// Its owner thread, after its sleep. Never throws.
  void remove(int fd) noexcept;
  /// Some thread sleeps (or is about to).
  bool any() const noexcept { return count_.load(std::memory_order_acquire) > 0; }
  /// Wakes every sleeper. Any thread; never throws.
  void wake_all() noexcept;

 private:
  std::mutex mutex_;
  std::vector<int> fds_;  ///< guarded by mutex_
  std::atomic<int> count_{0};
};

}  // namespace cohort::transport::ucx
