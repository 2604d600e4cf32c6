#pragma once

// A scope on one CUDA device: cohort never changes which device the application's next kernel
// or allocation goes to.

#include "core/log.hpp"
#include "gpu/device_runtime.hpp"

#include <exception>

namespace cohort::gpu {

/// Makes `device` current for a scope and restores the caller's device afterwards (a failure
/// to restore is logged: a destructor must not throw).
class DeviceGuard {
 public:
  DeviceGuard(DeviceRuntime& rt, int device) : rt_(rt), previous_(rt.current_device()) {
    if (previous_ != device) rt_.set_device(device);
    changed_ = previous_ != device;
  }
  ~DeviceGuard() {
    if (!changed_) return;
    try {
      rt_.set_device(previous_);
    } catch (const std::exception& e) {
      COHORT_LOG_WARN("could not make cuda:{} current again: {}", previous_, e.what());
    }
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  DeviceRuntime& rt_;
  int previous_;
  bool changed_ = false;
};

}  // namespace cohort::gpu
