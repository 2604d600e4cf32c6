#pragma once

// Argument checks shared by the training layer's entry points. Each names the call (`op`) and
// the buffer (`what`: "gradient 3", "the output", "parameter 0") so an engine's author sees
// which argument of which call was wrong. Host-only for now: device memory is refused with
// Unsupported until the GPU path lands.

#include <cohort/buffer.hpp>
#include <cohort/error.hpp>

#include <fmt/format.h>

#include <string>
#include <string_view>

namespace cohort::train {

/// Unsupported unless host code can read and write `buffer` (cpu, cuda_host, cuda_managed).
inline void require_host(std::string_view op, std::string_view what, const Buffer& buffer) {
  if (buffer.device().host_accessible()) return;
  throw Error(ErrorCode::Unsupported,
              fmt::format("{}: {} is on device {}; device buffers are unsupported until the GPU "
                          "path lands (use host, pinned or managed memory)",
                          op, what, buffer.device().to_string()));
}

/// InvalidArgument unless `buffer`'s dtype is one of the six floating types.
inline void require_floating(std::string_view op, std::string_view what, const Buffer& buffer) {
  if (dtype_is_floating(buffer.dtype())) return;
  throw Error(ErrorCode::InvalidArgument,
              fmt::format("{}: {} has dtype {}; it must be floating point (float, double, half, "
                          "bfloat16, fp8_e4m3 or fp8_e5m2)",
                          op, what, dtype_name(buffer.dtype())));
}

/// InvalidArgument unless `buffer` is contiguous and, when `written`, writable.
inline void require_contiguous(std::string_view op, std::string_view what, const Buffer& buffer,
                               bool written) {
  if (!buffer.is_contiguous())
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("{}: {} is not contiguous; pass a contiguous buffer", op, what));
  if (written && buffer.read_only())
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("{}: {} is read-only; it is written in place", op, what));
}

/// A gradient as the gradient helpers take it: host, floating, contiguous, writable.
inline void check_gradient(std::string_view op, std::size_t index, const Buffer& grad) {
  const std::string what = fmt::format("gradient {}", index);
  require_host(op, what, grad);
  require_floating(op, what, grad);
  require_contiguous(op, what, grad, /*written=*/true);
}

}  // namespace cohort::train
