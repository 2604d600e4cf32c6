#pragma once

// Move-only owners of CUDA streams and events. Destruction never throws; a failure to destroy
// is logged (the device may already be gone when a job tears down after an error).

#include <cuda_runtime_api.h>

#include <utility>

namespace cohort::gpu {

class CudaStream {
 public:
  CudaStream() = default;
  /// A non-blocking stream on the current device.
  static CudaStream create();
  ~CudaStream();
  CudaStream(CudaStream&& other) noexcept : stream_(std::exchange(other.stream_, nullptr)) {}
  CudaStream& operator=(CudaStream&& other) noexcept;
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;

  cudaStream_t get() const noexcept { return stream_; }

 private:
  explicit CudaStream(cudaStream_t stream) : stream_(stream) {}
  cudaStream_t stream_ = nullptr;
};

class CudaEvent {
 public:
  CudaEvent() = default;
  /// An event without timing, for completion polling.
  static CudaEvent create();
  ~CudaEvent();
  CudaEvent(CudaEvent&& other) noexcept : event_(std::exchange(other.event_, nullptr)) {}
  CudaEvent& operator=(CudaEvent&& other) noexcept;
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;

  cudaEvent_t get() const noexcept { return event_; }

 private:
  explicit CudaEvent(cudaEvent_t event) : event_(event) {}
  cudaEvent_t event_ = nullptr;
};

}  // namespace cohort::gpu
