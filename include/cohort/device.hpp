#pragma once

/// Where a Buffer's memory lives. The type codes equal DLPack's DLDeviceType values so the two
/// convert without a table.

#include <cstdint>
#include <string>

namespace cohort {

enum class DeviceType : std::int32_t {
  CPU = 1,
  CUDA = 2,
  CUDAHost = 3,      ///< pinned host memory, addressable by the CPU
  CUDAManaged = 13,  ///< unified memory, addressable by the CPU
};

struct Device {
  DeviceType type = DeviceType::CPU;
  std::int32_t id = 0;

  static constexpr Device cpu() { return {DeviceType::CPU, 0}; }
  static constexpr Device cuda(std::int32_t index) { return {DeviceType::CUDA, index}; }

  /// True when host code may read and write the memory directly.
  constexpr bool host_accessible() const {
    return type == DeviceType::CPU || type == DeviceType::CUDAHost ||
           type == DeviceType::CUDAManaged;
  }
  /// "cpu", "cuda:1", "cuda_host:0", "cuda_managed:0".
  std::string to_string() const;

  friend constexpr bool operator==(const Device&, const Device&) = default;
};

}  // namespace cohort
