// In-place scaling: the device side of clip_grad_norm's multiply by the clipping coefficient.
//
// f64 data is multiplied by the factor in f64; the other dtypes take the factor rounded to float
// and convert's same-dtype multiply (in float, rounded once back to the dtype). That is what the
// host path does (clipping.cpp), so a gradient clipped on the device equals the same gradient
// clipped on the host bit for bit. NaN is kept.
//
// Cost: one read and one write pass over the data.

#include "gpu/kernels/device_kernels.hpp"
#include "gpu/kernels/launch_config.cuh"

namespace cohort::gpu::kernels {
namespace {

__global__ void scale_f64_kernel(double* data, std::size_t count, double factor) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += stride)
    data[i] *= factor;
}

}  // namespace

void launch_scale(DType dtype, void* data, std::size_t count, double factor, void* stream) {
  with_float_dtype(dtype, "launch_scale", [](auto) {});
  if (dtype != DType::Float64) {
    launch_convert(dtype, data, dtype, data, count, static_cast<float>(factor), nullptr, stream);
    return;
  }
  if (count == 0) return;
  scale_f64_kernel<<<blocks_for(count), kThreadsPerBlock, 0, as_stream(stream)>>>(
      static_cast<double*>(data), count, factor);
  check_launch("launch_scale");
}

}  // namespace cohort::gpu::kernels
