#pragma once

// Whether this machine lets one process read a sibling's memory (process_vm_readv), as the
// ranks of a job are siblings under their launcher: the kernel's own answer, asked without
// cohort, for tests of the single-copy algorithms to know whether those must run or must decline.
// Yama's ptrace_scope 1, a seccomp profile or a missing capability makes it false.

namespace cohort::test {

/// Forks two children; the second reads a value from the first. Call before the test starts
/// threads of its own (it forks).
bool siblings_can_read_each_other();

}  // namespace cohort::test
