#pragma once

// The descriptors cohort_buffer_tensor hands out for read-only buffers. The collectives take
// plain DLTensors, which cannot say "read-only" (only DLPack 1.x's managed tensor can), so the C
// ABI remembers which of its own descriptors are, and borrow() makes their Buffers read-only:
// passing one as an output is then refused as it is in C++ and Python. A copy of the struct
// made by the caller is not recognised (cohort.h says to pass the pointer it returned).

#include <cohort/cohort.h>

namespace cohort::capi {

/// Remembers `tensor` as a read-only buffer's descriptor until forget_read_only_descriptor.
/// Thread-safe. Throws std::bad_alloc.
void note_read_only_descriptor(const DLTensor* tensor);
/// Forgets it (its buffer is being destroyed). Thread-safe.
void forget_read_only_descriptor(const DLTensor* tensor) noexcept;
/// Whether `tensor` is a live read-only buffer's descriptor. One relaxed load while none is
/// live (the usual case); a lock otherwise. Thread-safe.
bool is_read_only_descriptor(const DLTensor* tensor) noexcept;

}  // namespace cohort::capi
