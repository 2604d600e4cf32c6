#include "core/bulk_allocation.hpp"

#include <sys/mman.h>

#include <cstdlib>

namespace cohort {

void* allocate_bulk(std::size_t bytes, std::size_t small_alignment, std::size_t* rounded) noexcept {
  const std::size_t alignment = bytes >= kHugePageBytes ? kHugePageBytes : small_alignment;
  const std::size_t size = (bytes + alignment - 1) / alignment * alignment;
  *rounded = size;
  void* memory = std::aligned_alloc(alignment, size);
  // Advice only: kernels without THP (or with it disabled) keep 4 KiB pages, which is correct.
  if (memory != nullptr && alignment == kHugePageBytes) (void)madvise(memory, size, MADV_HUGEPAGE);
  return memory;
}

}  // namespace cohort
