#pragma once

// Knowing that another thread of this process is blocked inside a call, not merely about to make
// it: the event a test needs before it releases that call ("a blocked get is released by a later
// set"), where sleeping a while only makes it likely. The kernel reports it: a thread asleep in a
// system call shows state 'S' in /proc/self/task/<tid>/stat, and /proc/self/task/<tid>/syscall
// names the call and its arguments. Linux only.

#include <chrono>
#include <optional>
#include <string_view>

#include <sys/types.h>

namespace cohort::test {

/// The calling thread's id as the kernel knows it (the name of its /proc/self/task/ entry).
pid_t current_thread_id();

/// The kinds of blocking a test waits for.
enum class BlockedIn {
  /// A condition variable's wait: futex(FUTEX_WAIT_BITSET), which glibc's pthread_cond_wait
  /// and its timed variants use, and which a contended mutex (plain FUTEX_WAIT) does not.
  ConditionVariable,
  /// The same wait without a timeout (its timeout argument is NULL): a thread that nothing but
  /// a notification will wake.
  ConditionVariableWithoutTimeout,
  /// Waiting for a file descriptor: poll, ppoll, select, pselect6, epoll_wait, read or recv.
  FileDescriptor,
};

/// Waits until thread `tid` of this process is asleep in a call of kind `where`. True once it
/// is; false when `timeout` passes first. Reads /proc between sched_yield()s: the wait is for a
/// state, which no file descriptor announces. Throws std::runtime_error when /proc cannot be
/// read (the thread must exist for the whole wait).
bool wait_until_blocked(pid_t tid, BlockedIn where, std::chrono::milliseconds timeout);

/// The id of this process's thread named `name` (pthread_setname_np; /proc/self/task/*/comm),
/// if exactly one has that name.
std::optional<pid_t> find_thread(std::string_view name);

}  // namespace cohort::test
