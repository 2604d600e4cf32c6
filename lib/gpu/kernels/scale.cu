// In-place scaling: the device side of clip_grad_norm's multiply by the clipping coefficient.
//
// The factor is rounded to float first and the multiply is convert's same-dtype one (in f64 for
// f64 data, in float otherwise, rounded once back to the dtype), because that is what the host
// path does (clipping.cpp: kernels::convert with static_cast<float>(coef)), so a gradient
// clipped on the device equals the same gradient clipped on the host bit for bit. NaN is kept.
//
// Cost: one read and one write pass over the data.

#include "gpu/kernels/device_kernels.hpp"
#include "gpu/kernels/launch_config.cuh"

namespace cohort::gpu::kernels {

void launch_scale(DType dtype, void* data, std::size_t count, double factor, void* stream) {
  with_float_dtype(dtype, "launch_scale", [](auto) {});
  launch_convert(dtype, data, dtype, data, count, static_cast<float>(factor), nullptr, stream);
}

}  // namespace cohort::gpu::kernels
