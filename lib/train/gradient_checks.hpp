#pragma once

// Argument checks shared by the gradient helpers (GradientSynchronizer, clipping): the buffers
// they accept are the engine's gradients, written in place by host kernels.

#include <cohort/buffer.hpp>
#include <cohort/error.hpp>

#include <fmt/format.h>

#include <cstddef>
#include <string_view>

namespace cohort::train {

/// Throws unless `grad` (gradient `index` of the caller's list) is a host, floating, contiguous,
/// writable buffer: Unsupported for device memory (no GPU path here yet), InvalidArgument
/// otherwise. `op` prefixes the message ("clip_grad_norm").
inline void check_gradient(std::string_view op, std::size_t index, const Buffer& grad) {
  if (!grad.device().host_accessible()) {
    throw Error(ErrorCode::Unsupported,
                fmt::format("{}: gradient {} is on device {}; only host memory (cpu, cuda_host, "
                            "cuda_managed) is supported",
                            op, index, grad.device().to_string()));
  }
  if (!dtype_is_floating(grad.dtype())) {
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("{}: gradient {} has dtype {}; gradients must be floating point", op,
                            index, dtype_name(grad.dtype())));
  }
  if (!grad.is_contiguous()) {
    throw Error(
        ErrorCode::InvalidArgument,
        fmt::format("{}: gradient {} is not contiguous; pass a contiguous buffer", op, index));
  }
  if (grad.read_only()) {
    throw Error(
        ErrorCode::InvalidArgument,
        fmt::format("{}: gradient {} is read-only; gradients are written in place", op, index));
  }
}

}  // namespace cohort::train
