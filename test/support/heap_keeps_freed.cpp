#include "support/heap_keeps_freed.hpp"

#include <malloc.h>

namespace cohort::test {

void keep_freed_memory_in_heap() {
  mallopt(M_MMAP_THRESHOLD, 256 << 20);
  mallopt(M_TRIM_THRESHOLD, 512 << 20);
}

}  // namespace cohort::test
