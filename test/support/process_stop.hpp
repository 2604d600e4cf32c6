#pragma once

// Freezing a process the way a hung host freezes: SIGSTOP, then waiting until it has taken
// effect. kill() returns before it has: a stop signal is taken by one thread, which then asks
// the others to stop, each on its way back from the kernel; until the last has, one of them may
// still answer a request sent after kill() returned.

#include <chrono>

#include <sys/types.h>

namespace cohort::test {

/// Sends SIGSTOP to `pid` (any process, not only a child) and waits until every thread of it
/// is stopped, as /proc/<pid>/task shows. True once they are; false when kill() fails or
/// `timeout` passes first.
bool stop_process(pid_t pid, std::chrono::milliseconds timeout);

}  // namespace cohort::test
