#pragma once

// Host-side launchers of the training layer's device kernels (*.cu beside this header, compiled
// by nvcc). Each queues one kernel (or a short fixed sequence) on `stream`, a cudaStream_t passed
// as void* so this header needs no CUDA include, and throws cohort::Error when the launch fails.
// Semantics: DeviceRuntime's kernel methods (device_runtime.hpp), i.e. train::kernels' on device
// memory. Built only where COHORT_HAVE_DEVICE_KERNELS is 1.

#include <cohort/dtype.hpp>

#include "gpu/device_runtime.hpp"

#include <cstddef>
#include <cstdint>

namespace cohort::gpu::kernels {

void launch_convert(DType src_dtype, const void* src, DType dst_dtype, void* dst, std::size_t count,
                    float factor, std::int32_t* nonfinite_flag, void* stream);
void launch_norm_part(DType dtype, const void* data, std::size_t count, DeviceNormPart part,
                      double* result, void* stream);
void launch_scale(DType dtype, void* data, std::size_t count, double factor, void* stream);

}  // namespace cohort::gpu::kernels
