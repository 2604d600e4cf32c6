#pragma once

// A memory fence on every thread of this process at once, paid by the caller alone (Linux's
// membarrier(2), private expedited: an interrupt to each CPU running one of the process's
// threads). It lets one side of a Dekker-style handshake do without a fence of its own: the
// other side calls process_fence() between its store and its load, and the pair is then ordered
// as if both had fenced. Used where the cheap side runs once per tiny collective and the
// expensive side rarely (comm/executor.hpp, the biased fast path): a locked instruction on every
// op stalled behind the previous op's last store into shared memory.
//
// Measured on a 2-vCPU VM (2026-11-29): 0.13 us with no other thread of the process running,
// 25 us with one running on the other CPU.

namespace cohort {

/// Whether process_fence() works in this process: the first call registers the process with
/// the kernel (once per process; again in a forked child). False where the kernel or a seccomp
/// profile refuses membarrier, and under ThreadSanitizer, which cannot see the fence.
bool process_fence_available() noexcept;

/// Every thread of this process has passed a full memory fence when this returns. Only after
/// process_fence_available() returned true; terminates the process if the kernel then refuses
/// (the callers' exclusion would be broken, which is worse than stopping).
void process_fence() noexcept;

}  // namespace cohort
