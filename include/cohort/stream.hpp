#pragma once

/// Stream: a device stream as an opaque handle, so no CUDA type appears in cohort's headers.

#include <cstdint>

namespace cohort {

/// A CUDA stream, as the bits of its cudaStream_t: torch's `torch.cuda.Stream.cuda_stream`,
/// CuPy's `Stream.ptr`, or `reinterpret_cast<std::uintptr_t>(stream)` in C++. 0 is CUDA's legacy
/// default stream (a valid stream, distinct from passing none). cohort never creates, owns or
/// destroys a Stream it is given: the caller keeps it alive until the ops queued on it ran.
struct Stream {
  std::uintptr_t handle = 0;

  friend constexpr bool operator==(const Stream&, const Stream&) = default;
};

}  // namespace cohort
