// Placement of the training layer's element-wise work (see device_placement.hpp).

#include "train/device_placement.hpp"

#include <cohort/error.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <exception>

#include "core/log.hpp"
#include "train/buffer_checks.hpp"

namespace cohort::train {

bool on_device(const Buffer& buffer) noexcept {
  const Device device = buffer.device();
  if (device.type == DeviceType::CUDA) return true;
  if (device.type != DeviceType::CUDAManaged) return false;
  gpu::DeviceRuntime* runtime = gpu::device_runtime();
  return runtime != nullptr && device.id >= 0 && device.id < runtime->device_count();
}

int common_place(std::string_view op, std::span<const Buffer> buffers,
                 const std::function<std::string(std::size_t)>& name) {
  bool all_host = true, all_device = true;
  for (const Buffer& b : buffers) {
    all_host = all_host && b.device().host_accessible();
    all_device = all_device && on_device(b);
  }
  if (buffers.empty() || (all_host && !all_device)) return -1;
  // Some buffer is device memory (or all are managed on visible devices): one device for all.
  for (std::size_t i = 1; i < buffers.size(); ++i) {
    const Device first = buffers[0].device(), other = buffers[i].device();
    if (on_device(buffers[i]) && on_device(buffers[0]) && other.id == first.id) continue;
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("{}: {} is on {} but {} is on {}; both must be host memory or both "
                            "on the same device",
                            op, name(0), first.to_string(), name(i), other.to_string()));
  }
  return buffers[0].device().id;
}

std::vector<int> devices_of(std::span<const Buffer> buffers) {
  std::vector<int> devices;
  for (const Buffer& b : buffers)
    if (on_device(b) && std::find(devices.begin(), devices.end(), b.device().id) == devices.end())
      devices.push_back(b.device().id);
  return devices;
}

gpu::DeviceRuntime& device_runtime_for(std::string_view op, std::string_view what,
                                       const Buffer& buffer) {
  require_kernel_access(op, what, buffer);
  require_element_aligned(op, what, buffer);  // managed memory passed the check above
  if (gpu::DeviceRuntime* runtime = gpu::device_runtime()) return *runtime;
  // Managed memory passes the check above as host memory; on_device() sent it here only with
  // a runtime, so this is reached only by a caller that skipped on_device().
  throw Error(ErrorCode::Internal, fmt::format("{}: {} on {} has no device runtime", op, what,
                                               buffer.device().to_string()));
}

DeviceScope::DeviceScope(gpu::DeviceRuntime& runtime, int device)
    : runtime_(runtime), previous_(runtime.current_device()) {
  if (previous_ != device) runtime_.set_device(device);
}

DeviceScope::~DeviceScope() {
  try {
    if (runtime_.current_device() != previous_) runtime_.set_device(previous_);
  } catch (const std::exception& e) {
    COHORT_LOG_WARN("training layer: could not make device {} current again: {}", previous_,
                    e.what());
  }
}

void finish_device_work(const Buffer& buffer) {
  if (!on_device(buffer)) return;
  gpu::DeviceRuntime& runtime = device_runtime_for("training layer", "a buffer", buffer);
  DeviceScope scope(runtime, buffer.device().id);
  runtime.synchronize_stream(gpu::StreamHandle{});
}

}  // namespace cohort::train
