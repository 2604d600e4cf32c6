#pragma once

// The descriptors cohort_buffer_tensor hands out, and the buffers behind them. The collectives
// take plain DLTensors, which can say neither who owns the memory nor that it is read-only (only
// DLPack 1.x's managed tensor can), so the C ABI remembers its own descriptors and borrow()
// gives the buffer itself for one of them:
// - its owner goes with the op, so a failed op that leaves a transfer in flight (cohort.h) keeps
//   the memory alive past cohort_buffer_destroy, as the C++ API keeps Buffer::owner();
// - a read-only buffer stays read-only: passing it as an output is refused as in C++ and Python.
// A copy of the struct made by the caller is not recognised (cohort.h says to pass the pointer
// cohort_buffer_tensor returned).

#include <cohort/cohort.h>
#include <cohort/buffer.hpp>

#include <optional>

namespace cohort::capi {

/// Remembers `tensor` as `buffer`'s descriptor until forget_buffer_descriptor. Thread-safe.
/// Throws std::bad_alloc.
void note_buffer_descriptor(const DLTensor* tensor, const Buffer& buffer);
/// Forgets it (its buffer handle is being destroyed). Thread-safe.
void forget_buffer_descriptor(const DLTensor* tensor) noexcept;
/// The buffer whose descriptor `tensor` is, if it is a live handle's. One relaxed load while
/// no handle is live; a shared lock otherwise. Thread-safe.
std::optional<Buffer> buffer_of_descriptor(const DLTensor* tensor);

}  // namespace cohort::capi
