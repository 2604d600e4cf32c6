#pragma once

// Memory that collectives stream through: Buffer storage and collective scratch.
//
// From kHugePageBytes on, allocations are aligned to and advised for transparent huge pages: a
// collective streams through the whole buffer, and with 4 KiB pages (worse under a hypervisor's
// nested page tables) TLB misses cost a large share of memory bandwidth. Measured here: memcpy of
// 64 MiB moved 6-8 GB/s on 4 KiB pages and 9-12 GB/s on huge pages; a single-copy read from
// another process (transport/cross_memory.hpp) 6-9 GB/s against 32-38 GB/s.

#include <cstddef>

namespace cohort {

inline constexpr std::size_t kHugePageBytes = 2 * 1024 * 1024;

/// At least `bytes` (rounded up to the alignment, reported in `*rounded`), aligned to
/// `small_alignment` below kHugePageBytes and to kHugePageBytes from there on. Null when the
/// allocation fails; release with std::free. The memory is not initialised.
void* allocate_bulk(std::size_t bytes, std::size_t small_alignment, std::size_t* rounded) noexcept;

}  // namespace cohort
