// The process's device runtime: an installed one (tests' CPU double) or the CUDA runtime.

#include "gpu/device_runtime.hpp"

#include <atomic>
#include <mutex>
#include <vector>

namespace cohort::gpu {

#if COHORT_GPU_RUNTIME
/// Defined in cuda_device_runtime.cpp: the process-wide CUDA + NCCL runtime.
DeviceRuntime& cuda_runtime() noexcept;
#endif

namespace {

// Installed runtimes are kept for the whole process (a communicator may still hold the raw
// pointer); replacing one only changes what later calls get.
std::mutex installed_mutex;
std::shared_ptr<DeviceRuntime>& installed_holder() {
  static std::shared_ptr<DeviceRuntime> holder;
  return holder;
}
std::atomic<DeviceRuntime*> installed{nullptr};

}  // namespace

DeviceRuntime* device_runtime() noexcept {
  if (DeviceRuntime* runtime = installed.load(std::memory_order_acquire)) return runtime;
#if COHORT_GPU_RUNTIME
  return &cuda_runtime();
#else
  return nullptr;
#endif
}

void install_device_runtime(std::shared_ptr<DeviceRuntime> runtime) {
  std::lock_guard lock(installed_mutex);
  static std::vector<std::shared_ptr<DeviceRuntime>> retired;
  if (installed_holder()) retired.push_back(installed_holder());
  installed_holder() = std::move(runtime);
  installed.store(installed_holder().get(), std::memory_order_release);
}

bool built_with_cuda() noexcept {
#if COHORT_GPU_RUNTIME
  return true;
#else
  return false;
#endif
}

}  // namespace cohort::gpu
