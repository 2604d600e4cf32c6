// DeviceMemory over the CUDA runtime (compiled only where cohort was built with CUDA).

#include "device_memory.hpp"

#include <cohort/error.hpp>

#include <cuda_runtime_api.h>
#include <fmt/format.h>

namespace cohort::bench {
namespace {

void check_cuda(cudaError_t status, const char* call) {
  if (status != cudaSuccess)
    throw Error(ErrorCode::SystemError, fmt::format("{}: {} ({})", call, cudaGetErrorString(status),
                                                    cudaGetErrorName(status)));
}

class CudaDeviceMemory final : public DeviceMemory {
 public:
  CudaDeviceMemory(int device, std::string name) : device_(device), name_(std::move(name)) {}

  Device device() const noexcept override { return Device::cuda(device_); }
  std::string describe() const override { return fmt::format("cuda:{} ({})", device_, name_); }

  void copy_to_device(void* device_dst, const void* host_src, std::size_t bytes) override {
    if (bytes == 0) return;
    check_cuda(cudaMemcpy(device_dst, host_src, bytes, cudaMemcpyHostToDevice),
               "cudaMemcpy to the device");
    // From pageable memory cudaMemcpy may return before the DMA landed, and the NCCL peer's
    // non-blocking stream is not ordered after the legacy default stream the copy used: wait
    // here (outside the timed loop) so every contender reads the filled data.
    check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize after the copy to the device");
  }
  void copy_to_host(void* host_dst, const void* device_src, std::size_t bytes) override {
    if (bytes == 0) return;
    check_cuda(cudaMemcpy(host_dst, device_src, bytes, cudaMemcpyDeviceToHost),
               "cudaMemcpy to the host");
  }

 private:
  int device_;
  std::string name_;
};

}  // namespace

std::unique_ptr<DeviceMemory> open_cuda_device(int local_rank) {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  // Without a driver, cudaGetDeviceCount fails (cudaErrorNoDevice, cudaErrorInsufficientDriver):
  // either way there is nothing to run on, which is a refusal rather than a crash.
  if (status != cudaSuccess || count == 0) {
    const std::string why = status != cudaSuccess ? cudaGetErrorString(status) : "0 devices";
    cudaGetLastError();  // resets the last error, so a later call does not report this one
    throw Error(ErrorCode::Unsupported,
                fmt::format("--device cuda: no CUDA device is visible to this process ({})", why));
  }
  const int device = local_rank % count;
  check_cuda(cudaSetDevice(device), "cudaSetDevice");
  cudaDeviceProp properties{};
  check_cuda(cudaGetDeviceProperties(&properties, device), "cudaGetDeviceProperties");
  return std::make_unique<CudaDeviceMemory>(device, properties.name);
}

}  // namespace cohort::bench
