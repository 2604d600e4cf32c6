#pragma once

// Tests whose ranks allocate and free buffers of megabytes per op: keep freed memory in the heap.
//
// glibc maps each allocation above its mmap threshold (128 KiB at first, rising to at most
// 32 MiB as such blocks are freed) and unmaps it when freed, and trims the heap's top back to the
// kernel past twice that; either way the next op's buffers fault every page in afresh, and a
// fault costs microseconds on a paravirtualised guest (a third of a large sweep's time).

namespace cohort::test {

/// Serves allocations of up to 256 MiB from the heap and returns nothing to the kernel below
/// 512 MiB at its top. Call before the ranks fork (they inherit it) or in each rank.
void keep_freed_memory_in_heap();

}  // namespace cohort::test
