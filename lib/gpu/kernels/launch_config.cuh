#pragma once

// How the training kernels are launched: grid-stride loops over a grid sized from the element
// count and capped, and one check after each launch that turns a failure into cohort::Error.

#include <cuda_runtime_api.h>

#include <cohort/dtype.hpp>
#include <cohort/error.hpp>

#include <algorithm>
#include <cstddef>
#include <string>
#include <type_traits>

#include "gpu/gpu_status.hpp"

namespace cohort::gpu::kernels {

inline constexpr int kThreadsPerBlock = 256;
// 2048 blocks of 256 threads keep every SM of an H100 (132 SMs x 2048 threads) busy several
// times over; past that a grid-stride loop gives each thread more elements instead of more
// blocks to schedule. It also bounds norm_part's per-block partials to 16 KiB.
inline constexpr std::size_t kMaxBlocks = 2048;

/// Blocks for `count` elements (count > 0), one element per thread up to kMaxBlocks.
inline unsigned blocks_for(std::size_t count) {
  const std::size_t wanted = (count + kThreadsPerBlock - 1) / kThreadsPerBlock;
  return static_cast<unsigned>(std::min(wanted, kMaxBlocks));
}

/// Throws when the launch just queued failed (bad configuration, no device, a sticky error).
inline void check_launch(const char* what) {
  check_cuda(cudaGetLastError(), what);
}

/// Calls f(std::integral_constant<DType, dtype>{}) for the six floating dtypes, so each
/// launcher instantiates its kernel per dtype; InvalidArgument naming `what` for the others.
template <class F>
void with_float_dtype(DType dtype, const char* what, F&& f) {
  switch (dtype) {
    case DType::Float32: return f(std::integral_constant<DType, DType::Float32>{});
    case DType::Float64: return f(std::integral_constant<DType, DType::Float64>{});
    case DType::Float16: return f(std::integral_constant<DType, DType::Float16>{});
    case DType::BFloat16: return f(std::integral_constant<DType, DType::BFloat16>{});
    case DType::Float8E4M3: return f(std::integral_constant<DType, DType::Float8E4M3>{});
    case DType::Float8E5M2: return f(std::integral_constant<DType, DType::Float8E5M2>{});
    default:
      throw Error(ErrorCode::InvalidArgument, std::string(what) + ": dtype " +
                                                  std::string(dtype_name(dtype)) +
                                                  " is not a floating type");
  }
}

inline cudaStream_t as_stream(void* stream) {
  return static_cast<cudaStream_t>(stream);
}

}  // namespace cohort::gpu::kernels
