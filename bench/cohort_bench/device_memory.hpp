#pragma once

// Where cohort-bench's buffers live with --device cuda: the device this rank uses and the
// host <-> device copies the check needs (the fill and the count of wrong elements run on the
// host, on staging copies). No CUDA type appears here: the CUDA implementation is compiled only
// where cohort was built with CUDA (COHORT_BENCH_HAVE_CUDA), and the runner sees this interface.

#include <cohort/device.hpp>

#include <cstddef>
#include <memory>
#include <string>

namespace cohort::bench {

class DeviceMemory {
 public:
  virtual ~DeviceMemory() = default;

  /// The device the benchmark's buffers are allocated on (Buffer::allocate with it).
  virtual Device device() const noexcept = 0;
  /// "cuda:1 (NVIDIA H100 80GB HBM3)": for the table header and the JSON.
  virtual std::string describe() const = 0;
  /// Blocking copies of `bytes` bytes between host memory and the device's memory.
  virtual void copy_to_device(void* device_dst, const void* host_src, std::size_t bytes) = 0;
  virtual void copy_to_host(void* host_dst, const void* device_src, std::size_t bytes) = 0;
};

#if COHORT_BENCH_HAVE_CUDA
/// Makes CUDA device `local_rank % device count` current on the calling thread (one GPU per
/// rank, ranks of a node spread over its GPUs) and returns it. Throws Error(Unsupported) when
/// no CUDA device is visible (no driver, or CUDA_VISIBLE_DEVICES hides them all).
std::unique_ptr<DeviceMemory> open_cuda_device(int local_rank);
#endif

}  // namespace cohort::bench
