#pragma once

// Host memory for the training layer's own buffers that collectives move (gradients from
// contiguous_gradients, bucket staging): mappable where the kernel allows, so that the ranks of
// a host reduce them in each other's memory instead of copying (README, "Mappable buffers";
// 2 ranks, 16 KiB-256 MiB: 1.2-3x faster than ordinary memory).

#include <cohort/buffer.hpp>

#include <cstddef>

namespace cohort::train {

/// A zero-filled host allocation of `count` elements: Buffer::allocate_mappable, or, where the
/// kernel refuses one (no memfd, out of file descriptors: SystemError), Buffer::allocate, so a
/// process short of descriptors trains as before, only with copies. The fallback is logged once
/// per process at info level. `what` names the buffer in that message. Other errors propagate.
Buffer allocate_mappable_or_ordinary(std::size_t count, DType dtype, const char* what);

}  // namespace cohort::train
