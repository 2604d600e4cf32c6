#pragma once

// A copy whose destination bypasses the caches (non-temporal stores). For a large output that is
// written once and not read back soon, an ordinary store first reads every destination line in
// (read-for-ownership) and then evicts something useful for it: a third of the memory traffic of
// a copy is wasted. Worth it only when the destination is cold and larger than the caches; for
// anything the caller will touch again soon, copy_bytes is faster.

#include <cstddef>

namespace cohort {

/// Outputs of a reduction at least this large are written with stream_copy out of place
/// (shared_memory_reduction.cpp, allreduce/single_copy.cpp): larger than the caches keep, and
/// read next by their owners, not by the core that writes them.
inline constexpr std::size_t kStreamOutputMinBytes = 8 * 1024 * 1024;

/// memcpy semantics (no overlap). The stores are fenced before returning, so a flag published
/// afterwards is ordered after the data on every architecture.
void stream_copy(void* dst, const void* src, std::size_t bytes) noexcept;

}  // namespace cohort
