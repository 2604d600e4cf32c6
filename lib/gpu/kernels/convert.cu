// Conversion between the six float formats with a factor, and the fused non-finite check: the
// device side of cast, of the grad scaler's unscale + found-inf, and of the gradient
// synchroniser's bucket pack (with the pre-division) and unpack.
//
// How it works: one thread per element in a grid-stride loop computes exactly what
// train::kernels::convert computes for that element (codec::convert_element: in f64 when either
// side is f64, rounded once; in float otherwise). Elements are independent, so in place is safe
// when the sizes are equal. The flag: each warp votes once after its loop and one lane stores 1, so
// a buffer full of inf costs one store per warp, and a clean buffer none (the flag is never cleared
// here; the caller zeroes it once for several buffers).
//
// Elements are read and written as whole 1-, 2-, 4- or 8-byte words, so device buffers must be
// aligned to their element size (cudaMalloc'd memory and DLPack tensors are); the host kernels
// also take unaligned pointers.
//
// Cost: one read and one write pass over the data; no synchronisation between blocks.

#include <cstdint>

#include "gpu/kernels/device_kernels.hpp"
#include "gpu/kernels/float_codecs.cuh"
#include "gpu/kernels/launch_config.cuh"

namespace cohort::gpu::kernels {
namespace {

template <DType S, DType D>
__global__ void convert_kernel(const void* src, void* dst, std::size_t count, float factor,
                               std::int32_t* nonfinite_flag) {
  bool nonfinite = false;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += stride) {
    nonfinite |= codec::convert_element<S, D>(src, dst, i, factor);
  }
  // Every thread of the warp reaches the vote: the loop above is the only divergence.
  if (nonfinite_flag != nullptr && __any_sync(0xffffffffu, nonfinite) &&
      (threadIdx.x % warpSize) == 0)
    *nonfinite_flag = 1;
}

}  // namespace

void launch_convert(DType src_dtype, const void* src, DType dst_dtype, void* dst, std::size_t count,
                    float factor, std::int32_t* nonfinite_flag, void* stream) {
  with_float_dtype(src_dtype, "launch_convert", [&](auto s) {
    with_float_dtype(dst_dtype, "launch_convert", [&](auto d) {
      if (count == 0) return;
      convert_kernel<decltype(s)::value, decltype(d)::value>
          <<<blocks_for(count), kThreadsPerBlock, 0, as_stream(stream)>>>(src, dst, count, factor,
                                                                          nonfinite_flag);
      check_launch("launch_convert");
    });
  });
}

}  // namespace cohort::gpu::kernels
