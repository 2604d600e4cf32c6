#pragma once

// Whether this machine lets one process read a sibling's memory (process_vm_readv), as the
// ranks of a job are siblings under their launcher: the kernel's own answer, asked without
// cohort, for tests of the single-copy algorithms to know whether those must run or must decline.
// Yama's ptrace_scope 1, a seccomp profile or a missing capability makes it false.

#include <sys/types.h>

#include <cstddef>
#include <cstdint>

namespace cohort::test {

/// Whether this process can read `bytes` at `address` in process `pid` and finds only
/// `pattern` there.
bool reads_only(pid_t pid, std::uint64_t address, std::size_t bytes, unsigned char pattern);

/// Forks two children, once per process (the answer is kept); the second reads the first's
/// memory. Call before the test starts threads of its own (it forks).
bool siblings_can_read_each_other();

}  // namespace cohort::test
