#pragma once

// Waiting for a process to end without polling: a pidfd (Linux 5.3) becomes readable when the
// process exits, whether or not it is our child. Tests use it to wait for a child with a
// deadline, and for a rank to wait until a sibling rank has died.

#include <chrono>

#include <sys/types.h>

namespace cohort::test {

/// Waits until process `pid` has exited (a child counts once it is a zombie; it is not reaped
/// here). True when it has, or when no such process exists any more; false when `timeout`
/// passes first. Throws std::runtime_error when the pidfd cannot be opened or polled.
bool wait_for_exit(pid_t pid, std::chrono::milliseconds timeout);

}  // namespace cohort::test
