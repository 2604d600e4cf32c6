#include "gpu/cuda_handles.hpp"

#include "core/log.hpp"
#include "gpu/gpu_status.hpp"

namespace cohort::gpu {

CudaStream CudaStream::create() {
  cudaStream_t stream = nullptr;
  check_cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  return CudaStream(stream);
}

CudaStream::~CudaStream() {
  if (stream_ == nullptr) return;
  if (cudaError_t status = cudaStreamDestroy(stream_); status != cudaSuccess)
    COHORT_LOG_WARN("cudaStreamDestroy failed: {}", cudaGetErrorString(status));
}

CudaStream& CudaStream::operator=(CudaStream&& other) noexcept {
  if (this != &other) {
    CudaStream doomed(std::exchange(stream_, std::exchange(other.stream_, nullptr)));
  }
  return *this;
}

CudaEvent CudaEvent::create() {
  cudaEvent_t event = nullptr;
  check_cuda(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "cudaEventCreate");
  return CudaEvent(event);
}

CudaEvent::~CudaEvent() {
  if (event_ == nullptr) return;
  if (cudaError_t status = cudaEventDestroy(event_); status != cudaSuccess)
    COHORT_LOG_WARN("cudaEventDestroy failed: {}", cudaGetErrorString(status));
}

CudaEvent& CudaEvent::operator=(CudaEvent&& other) noexcept {
  if (this != &other) {
    CudaEvent doomed(std::exchange(event_, std::exchange(other.event_, nullptr)));
  }
  return *this;
}

}  // namespace cohort::gpu
