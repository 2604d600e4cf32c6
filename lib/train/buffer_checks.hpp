#pragma once

// Argument checks shared by the training layer's entry points. Each names the call (`op`) and
// the buffer (`what`: "gradient 3", "the output", "parameter 0") so an engine's author sees
// which argument of which call was wrong. Device memory is accepted where the call has a device
// path (cast, the grad scaler, clipping by norm, the gradient synchroniser, amax, all_to_all:
// device_placement.hpp) and a device runtime exists; the other calls take host memory only.

#include <cohort/buffer.hpp>
#include <cohort/error.hpp>

#include <fmt/format.h>

#include <cstdint>

#include "gpu/device_runtime.hpp"

#include <string>
#include <string_view>

namespace cohort::train {

/// Unsupported unless host code can read and write `buffer` (cpu, cuda_host, cuda_managed): for
/// the calls without a device path.
inline void require_host(std::string_view op, std::string_view what, const Buffer& buffer) {
  if (buffer.device().host_accessible()) return;
  throw Error(ErrorCode::Unsupported,
              fmt::format("{}: {} is on device {}; {} takes host memory only (use host, pinned or "
                          "managed memory)",
                          op, what, buffer.device().to_string(), op));
}

/// A host-accessible, contiguous `buffer` seen as plain host memory, flattened: what a helper
/// without a device path hands the communicator. The core runs an op on managed memory on its
/// device, which the other ranks, whose copies of the helper hold host memory, would not match.
/// It shares `buffer`'s owner (a failed op's owners are kept while the transport may still touch
/// the memory).
inline Buffer host_flat(const Buffer& buffer) {
  return Buffer::view(buffer.data(), {static_cast<std::int64_t>(buffer.count())}, buffer.dtype(),
                      Device::cpu(), {}, 0, buffer.owner());
}

/// Unsupported unless the training layer's kernels can process `buffer`: host memory always,
/// device memory where a device runtime exists (cohort built with CUDA, or a runtime installed)
/// and sees the buffer's device.
/// InvalidArgument when `buffer`'s first element is not aligned to its size: the device kernels
/// read and write whole elements through typed pointers, and a misaligned one is
/// cudaErrorMisalignedAddress, which poisons the process's CUDA context. (DLPack allows any byte
/// offset; the host kernels take unaligned data.)
inline void require_element_aligned(std::string_view op, std::string_view what,
                                    const Buffer& buffer) {
  const auto address = reinterpret_cast<std::uintptr_t>(buffer.data());
  if (address % buffer.element_size() != 0)
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("{}: {} on {} starts at address {:#x}, not a multiple of its {}-byte "
                            "elements; the device kernels need aligned elements",
                            op, what, buffer.device().to_string(), address, buffer.element_size()));
}

inline void require_kernel_access(std::string_view op, std::string_view what,
                                  const Buffer& buffer) {
  if (buffer.device().host_accessible()) return;
  require_element_aligned(op, what, buffer);
  gpu::DeviceRuntime* runtime = gpu::device_runtime();
  if (runtime == nullptr)
    throw Error(ErrorCode::Unsupported,
                fmt::format("{}: {} is on device {}, but this cohort was built without CUDA (use "
                            "host, pinned or managed memory)",
                            op, what, buffer.device().to_string()));
  const int devices = runtime->device_count();
  if (buffer.device().id < 0 || buffer.device().id >= devices)
    throw Error(
        ErrorCode::Unsupported,
        fmt::format("{}: {} is on device {}, but {} ({})", op, what, buffer.device().to_string(),
                    devices == 0 ? std::string("no CUDA device is visible")
                                 : fmt::format("only {} CUDA devices are visible", devices),
                    runtime->describe()));
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

/// A gradient as the gradient helpers take it: host or (with a device runtime) device memory,
/// floating, contiguous, writable.
inline void check_gradient(std::string_view op, std::size_t index, const Buffer& grad) {
  const std::string what = fmt::format("gradient {}", index);
  require_kernel_access(op, what, grad);
  require_floating(op, what, grad);
  require_contiguous(op, what, grad, /*written=*/true);
}

}  // namespace cohort::train
