// Partial norms for gradient clipping: Σ x², Σ |x| or max |x| of one buffer in f64, combined
// into a device double that may already hold other buffers' parts (added, or max for MaxAbs).
//
// How it works, in two launches on the caller's stream:
//   1. Each thread accumulates its grid-stride share of the elements in f64; each block reduces
//      its threads' values in shared memory (a fixed tree) into partials[block].
//   2. One block reduces the partials (each thread a fixed stride of them, then the same tree)
//      and combines the total with *result.
// The order of every addition depends only on the element count, so a buffer gives the same bits
// on every run (no atomics). It differs from the CPU's order (per-ISA vector lanes), so sums
// agree with train::kernels::norm_part to rounding, max |x| exactly. NaN anywhere gives NaN, an
// infinity (and no NaN) gives inf, as on the CPU. The partials live in stream-ordered memory
// (cudaMallocAsync), freed on the same stream after step 2.
//
// Cost: one read pass over the data, blocks_for(count) doubles of scratch, two launches.

#include <cuda_runtime_api.h>

#include "gpu/kernels/device_kernels.hpp"
#include "gpu/kernels/float_codecs.cuh"
#include "gpu/kernels/launch_config.cuh"

namespace cohort::gpu::kernels {
namespace {

// The larger of acc and a, NaN kept (float_kernels_impl.hpp's max_keep_nan).
__device__ __forceinline__ double max_keep_nan(double acc, double a) {
  return (a > acc || a != a) ? a : acc;
}

template <DeviceNormPart P>
__device__ __forceinline__ double combine(double acc, double x) {
  if constexpr (P == DeviceNormPart::MaxAbs) {
    return max_keep_nan(acc, x);
  } else {
    return __dadd_rn(acc, x);
  }
}

template <DeviceNormPart P>
__device__ __forceinline__ double accumulate(double acc, double x) {
  if constexpr (P == DeviceNormPart::SumSquares) return __dadd_rn(acc, __dmul_rn(x, x));
  return combine<P>(acc, fabs(x));
}

// Reduces one value per thread of the block into the returned value (valid in thread 0).
template <DeviceNormPart P>
__device__ double reduce_block(double value) {
  __shared__ double lanes[kThreadsPerBlock];
  lanes[threadIdx.x] = value;
  __syncthreads();
  for (unsigned half = kThreadsPerBlock / 2; half > 0; half /= 2) {
    if (threadIdx.x < half)
      lanes[threadIdx.x] = combine<P>(lanes[threadIdx.x], lanes[threadIdx.x + half]);
    __syncthreads();
  }
  return lanes[0];
}

// Step 1: partials[block] = this block's part of the elements.
template <DType D, DeviceNormPart P>
__global__ void __launch_bounds__(kThreadsPerBlock)
    partial_kernel(const void* data, std::size_t count, double* partials) {
  double acc = 0.0;  // neutral for every part: the values are >= 0 or NaN
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += stride)
    acc = accumulate<P>(acc, codec::load_wide<D>(data, i));
  const double block_part = reduce_block<P>(acc);
  if (threadIdx.x == 0) partials[blockIdx.x] = block_part;
}

// Step 2: *result = combine(*result, the partials' total).
template <DeviceNormPart P>
__global__ void __launch_bounds__(kThreadsPerBlock)
    combine_kernel(const double* partials, unsigned count, double* result) {
  double acc = 0.0;
  for (unsigned i = threadIdx.x; i < count; i += kThreadsPerBlock)
    acc = combine<P>(acc, partials[i]);
  const double total = reduce_block<P>(acc);
  if (threadIdx.x == 0) *result = combine<P>(*result, total);
}

template <DeviceNormPart P>
void launch_part(DType dtype, const void* data, std::size_t count, double* result,
                 cudaStream_t stream) {
  with_float_dtype(dtype, "launch_norm_part", [&](auto d) {
    if (count == 0) return;  // the part of nothing is 0: *result is already combined with it
    const unsigned blocks = blocks_for(count);
    void* scratch = nullptr;
    check_cuda(cudaMallocAsync(&scratch, blocks * sizeof(double), stream),
               "launch_norm_part: cudaMallocAsync");
    auto* partials = static_cast<double*>(scratch);
    partial_kernel<decltype(d)::value, P>
        <<<blocks, kThreadsPerBlock, 0, stream>>>(data, count, partials);
    const cudaError_t partial_status = cudaGetLastError();
    if (partial_status == cudaSuccess)
      combine_kernel<P><<<1, kThreadsPerBlock, 0, stream>>>(partials, blocks, result);
    const cudaError_t combine_status =
        partial_status == cudaSuccess ? cudaGetLastError() : partial_status;
    // Freed in stream order whatever happened, so a failed launch leaks nothing.
    const cudaError_t free_status = cudaFreeAsync(scratch, stream);
    check_cuda(combine_status, "launch_norm_part");
    check_cuda(free_status, "launch_norm_part: cudaFreeAsync");
  });
}

}  // namespace

void launch_norm_part(DType dtype, const void* data, std::size_t count, DeviceNormPart part,
                      double* result, void* stream) {
  switch (part) {
    case DeviceNormPart::SumSquares:
      return launch_part<DeviceNormPart::SumSquares>(dtype, data, count, result, as_stream(stream));
    case DeviceNormPart::SumAbs:
      return launch_part<DeviceNormPart::SumAbs>(dtype, data, count, result, as_stream(stream));
    case DeviceNormPart::MaxAbs:
      return launch_part<DeviceNormPart::MaxAbs>(dtype, data, count, result, as_stream(stream));
  }
  throw Error(ErrorCode::InvalidArgument, "launch_norm_part: unknown norm part");
}

}  // namespace cohort::gpu::kernels
