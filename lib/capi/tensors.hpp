#pragma once

// Borrowed DLTensors as Buffers, and the blocks that the C ABI's in-place forms (a NULL
// argument) stand for.

#include <cohort/cohort.h>
#include <cohort/buffer.hpp>

#include <cstddef>
#include <span>

namespace cohort::capi {

/// A Buffer viewing `tensor`'s memory without owning it: the descriptor (shape, strides, dtype,
/// device) is copied now, the data stays the caller's. Throws InvalidArgument naming `function`
/// and `role` ("in", "out") when tensor is NULL or its descriptor is not one cohort accepts.
Buffer borrow(const DLTensor* tensor, const char* function, const char* role);
/// As borrow(), but NULL gives an empty Buffer (for arguments only some ranks read).
Buffer borrow_or_empty(const DLTensor* tensor, const char* function, const char* role);

/// Elements [offset, offset + count) of `whole` as a 1-D view of the same memory: the block an
/// in-place form reads or writes. Throws InvalidArgument when `whole` is not contiguous or too
/// short.
Buffer block(const Buffer& whole, std::size_t offset, std::size_t count, const char* function,
             const char* role);
/// Block `rank` of `whole` cut in `size` equal blocks; throws InvalidArgument naming `function`
/// and `role` when its count is not divisible by `size`.
Buffer uniform_block(const Buffer& whole, int rank, int size, const char* function,
                     const char* role);
/// Block `rank` of `whole` laid out by `counts` (one per rank).
Buffer counts_block(const Buffer& whole, std::span<const std::size_t> counts, int rank,
                    const char* function, const char* role);

/// A count array from the C side. NULL with a non-zero length is InvalidArgument; a length
/// other than the communicator's size is left for the core to report.
std::span<const std::size_t> counts_of(const std::size_t* counts, std::size_t length,
                                       const char* function, const char* name);

}  // namespace cohort::capi
