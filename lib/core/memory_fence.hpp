#pragma once

// A memory fence that GCC's ThreadSanitizer builds leave out. GCC refuses
// std::atomic_thread_fence under -fsanitize=thread (-Werror=tsan); clang (CI's TSan build)
// accepts it, so there it stays, and TSan does not model fences under either compiler. The callers
// order a kernel copy between processes (process_vm_readv) against flags in shared memory that
// other processes write, which TSan cannot see either; the x86 machines those builds run on
// keep that order without a fence.

#include <atomic>

namespace cohort {

inline void memory_fence(std::memory_order order) noexcept {
#if defined(__SANITIZE_THREAD__)
  static_cast<void>(order);
#else
  std::atomic_thread_fence(order);
#endif
}

}  // namespace cohort
