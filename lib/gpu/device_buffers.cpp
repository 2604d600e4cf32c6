// Buffer::allocate on a device: CUDA device memory and pinned host memory through the device
// runtime. Lives in the GPU library (built everywhere) so the allocation logic is tested on CPU
// with the runtime's test double; without CUDA device_runtime() is null and these are refused.

#include <cohort/buffer.hpp>
#include <cohort/error.hpp>

#include "gpu/device_guard.hpp"
#include "gpu/device_runtime.hpp"

#include <fmt/format.h>

#include <cstring>
#include <limits>
#include <memory>

namespace cohort {
namespace {

[[noreturn]] void unsupported(const std::string& message) {
  throw Error(ErrorCode::Unsupported, message);
}

/// The runtime that will own an allocation on `device`, after checking the device exists.
gpu::DeviceRuntime& runtime_for(Device device) {
  gpu::DeviceRuntime* runtime = gpu::device_runtime();
  if (runtime == nullptr)
    unsupported(
        fmt::format("Buffer::allocate on {}: cohort was built without CUDA (rebuild where "
                    "the CUDA toolkit and NCCL are found, -Dcuda=enabled)",
                    device.to_string()));
  const int devices = runtime->device_count();
  if (devices == 0)
    unsupported(
        fmt::format("Buffer::allocate on {}: no CUDA device is visible to this process "
                    "(no driver, or CUDA_VISIBLE_DEVICES hides them all)",
                    device.to_string()));
  // Pinned host memory is not tied to a device, but its id still names one (DLPack's
  // convention): an id that names no device is as wrong there as for device memory.
  if (device.id < 0 || device.id >= devices)
    unsupported(
        fmt::format("Buffer::allocate on {}: there is no CUDA device {} ({} visible, ids "
                    "0 to {})",
                    device.to_string(), device.id, devices, devices - 1));
  return *runtime;
}

std::size_t checked_bytes(std::size_t count, DType dtype, Device device) {
  const std::size_t element = dtype_size(dtype);
  // Buffers describe their shape with int64 extents and byte offsets, so the byte size must fit
  // there too, not only in size_t.
  constexpr auto limit = static_cast<std::size_t>(std::numeric_limits<std::int64_t>::max());
  if (count > limit / element)
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("Buffer::allocate on {}: {} elements of {} ({} bytes each) exceed "
                            "the int64 byte range",
                            device.to_string(), count, dtype_name(dtype), element));
  return count * element;
}

}  // namespace

Buffer Buffer::allocate(std::size_t count, DType dtype, Device device) {
  switch (device.type) {
    case DeviceType::CPU: return allocate(count, dtype);
    case DeviceType::CUDAManaged:
      throw Error(ErrorCode::InvalidArgument,
                  fmt::format("Buffer::allocate on {}: managed memory is not offered (allocate "
                              "on cuda:N or cuda_host, or wrap managed memory with Buffer::view)",
                              device.to_string()));
    case DeviceType::CUDA:
    case DeviceType::CUDAHost: break;
    default:
      throw Error(
          ErrorCode::InvalidArgument,
          fmt::format("Buffer::allocate: unknown device type {}", static_cast<int>(device.type)));
  }
  gpu::DeviceRuntime& runtime = runtime_for(device);
  const std::size_t bytes = checked_bytes(count, dtype, device);
  // The deleter holds the runtime by raw pointer: runtimes live for the whole process (an
  // installed one that is replaced is retired, not destroyed), so it outlives every Buffer.
  gpu::DeviceRuntime* owner_runtime = &runtime;
  std::shared_ptr<void> memory;
  if (device.type == DeviceType::CUDA) {
    // The allocation, the fill and the wait on device.id's default stream, then the caller's
    // device is current again.
    const gpu::DeviceGuard on_device(runtime, device.id);
    void* data = runtime.allocate_device(bytes, device.id);
    // Own the memory before anything else can throw, so a failing fill does not leak it.
    memory = std::shared_ptr<void>(
        data, [owner_runtime](void* pointer) { owner_runtime->free_device(pointer); });
    if (bytes > 0) {
      // Stream 0 is the legacy default stream, which orders against every blocking stream of
      // the device; synchronising it makes the zeros visible to whatever stream uses the buffer.
      runtime.fill_async(data, 0, bytes, gpu::StreamHandle{0});
      runtime.synchronize_stream(gpu::StreamHandle{0});
    }
  } else {
    void* data = runtime.allocate_pinned(bytes);
    memory = std::shared_ptr<void>(
        data, [owner_runtime](void* pointer) { owner_runtime->free_pinned(pointer); });
    if (bytes > 0) std::memset(data, 0, bytes);
  }
  void* data = memory.get();
  return view(data, std::vector<std::int64_t>{static_cast<std::int64_t>(count)}, dtype, device, {},
              0, std::move(memory));
}

}  // namespace cohort
