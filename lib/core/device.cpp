#include <cohort/device.hpp>

namespace cohort {

std::string Device::to_string() const {
  switch (type) {
    case DeviceType::CPU: return "cpu";
    case DeviceType::CUDA: return "cuda:" + std::to_string(id);
    case DeviceType::CUDAHost: return "cuda_host:" + std::to_string(id);
    case DeviceType::CUDAManaged: return "cuda_managed:" + std::to_string(id);
  }
  return "device(" + std::to_string(static_cast<int>(type)) + "):" + std::to_string(id);
}

}  // namespace cohort
