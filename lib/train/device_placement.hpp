#pragma once

// Where the training layer's element-wise work on a buffer runs: host memory (cpu, cuda_host)
// through the host kernels (kernels/float_kernels.hpp), CUDA device memory and managed memory
// through the device runtime's kernels (gpu::DeviceRuntime, lib/gpu/kernels/*.cu).
//
// Device work is queued on the legacy default stream (stream 0) of the buffer's device, made
// current for the call and restored after. Stream 0 orders it after everything the engine queued
// on it or on any other blocking stream of that device, and the collectives the training layer
// then issues without a stream are ordered after stream 0 (communicator.hpp's device contract),
// so no extra synchronisation is needed between the two. Each public call returns once its
// device work is complete (finish_device_work), so the caller may read managed memory or free
// buffers right after, as with host memory.

#include <cohort/buffer.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gpu/device_runtime.hpp"

namespace cohort::train {

/// True when `buffer`'s elements are processed by device kernels: cuda memory, and cuda_managed
/// memory whose device the device runtime sees (otherwise managed memory is host memory to us).
bool on_device(const Buffer& buffer) noexcept;

/// Where an op over several buffers runs: -1 (the host kernels) when every buffer is host
/// addressable and not all of them are on_device (pinned and managed memory mix on the host),
/// else the one device all of them are on. InvalidArgument naming two buffers (name(i)) when
/// cuda memory meets host memory or buffers are on different devices. Callers check device
/// access first (require_kernel_access), so a missing runtime is reported as Unsupported.
int common_place(std::string_view op, std::span<const Buffer> buffers,
                 const std::function<std::string(std::size_t)>& name);

/// The devices of the buffers in `buffers` that are on_device(), each once, in first-seen order
/// (empty when all are host memory).
std::vector<int> devices_of(std::span<const Buffer> buffers);

/// The device runtime for processing `what` in `op`; Unsupported naming both when cohort has
/// none (built without CUDA and no runtime installed) or it does not see the buffer's device.
gpu::DeviceRuntime& device_runtime_for(std::string_view op, std::string_view what,
                                       const Buffer& buffer);

/// Makes `device` current on the calling thread for the scope's life, then restores the device
/// that was current before (a failure to restore is logged, never thrown).
class DeviceScope {
 public:
  DeviceScope(gpu::DeviceRuntime& runtime, int device);
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;
  ~DeviceScope();

 private:
  gpu::DeviceRuntime& runtime_;
  int previous_;
};

/// One scalar of device memory for a value read back on the host (the found-inf flag, a norm
/// accumulator), zeroed on creation; freed on destruction.
template <class T>
class DeviceScalar {
 public:
  DeviceScalar(gpu::DeviceRuntime& runtime, int device)
      : runtime_(runtime), data_(static_cast<T*>(runtime.allocate_device(sizeof(T), device))) {
    try {
      runtime_.fill_async(data_, 0, sizeof(T), gpu::StreamHandle{});
    } catch (...) {
      runtime_.free_device(data_);
      throw;
    }
  }
  DeviceScalar(const DeviceScalar&) = delete;
  DeviceScalar& operator=(const DeviceScalar&) = delete;
  ~DeviceScalar() { runtime_.free_device(data_); }

  T* get() const noexcept { return data_; }
  /// Waits for the work queued on stream 0 so far, then returns the value.
  T read() const {
    T value{};
    runtime_.copy_async(&value, data_, sizeof(T), gpu::StreamHandle{});
    runtime_.synchronize_stream(gpu::StreamHandle{});
    return value;
  }

 private:
  gpu::DeviceRuntime& runtime_;
  T* data_;
};

/// Blocks until the device work queued on stream 0 of `buffer`'s device is done; nothing for
/// host buffers.
void finish_device_work(const Buffer& buffer);

}  // namespace cohort::train
