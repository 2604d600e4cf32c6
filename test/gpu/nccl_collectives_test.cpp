// NCCL collectives on real GPUs, one process per rank. Needs at least one CUDA device; without
// one the test exits 77, which meson reports as skipped (never as passed).

#include <cohort/environment.hpp>
#include <cohort/error.hpp>
#include <cohort/launch.hpp>
#include <cohort/store.hpp>

#include "gpu/gpu_status.hpp"
#include "gpu/nccl_communicator.hpp"

#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdio>
#include <vector>

using namespace cohort;

namespace {

void run_rank(const Environment& env) {
  const int devices = gpu::visible_device_count();
  auto store = connect_store(env);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  auto nccl = gpu::NcclCommunicator::create(*store, "gpu-test", env.rank, env.world_size,
                                            env.local_rank % devices, deadline);

  const std::size_t count = 1000003;  // prime: no algorithm gets an even split
  std::vector<float> host(count);
  for (std::size_t i = 0; i < count; ++i) host[i] = float((i % 97) + env.rank);
  float* device = nullptr;
  gpu::check_cuda(cudaMalloc(&device, count * sizeof(float)), "cudaMalloc");
  gpu::check_cuda(cudaMemcpy(device, host.data(), count * sizeof(float), cudaMemcpyHostToDevice),
                  "cudaMemcpy");
  nccl->allreduce(device, device, count, DType::Float32, ReduceOp::Sum, deadline, "allreduce");
  gpu::check_cuda(cudaMemcpy(host.data(), device, count * sizeof(float), cudaMemcpyDeviceToHost),
                  "cudaMemcpy");
  cudaFree(device);

  const int n = env.world_size;
  for (std::size_t i = 0; i < count; ++i) {
    const float expected = float((i % 97) * n + n * (n - 1) / 2);
    if (host[i] != expected)
      throw Error(ErrorCode::Internal, "element " + std::to_string(i) + " is " +
                                           std::to_string(host[i]) + ", expected " +
                                           std::to_string(expected));
  }
}

}  // namespace

int main() {
  const int devices = gpu::visible_device_count();
  if (devices == 0) {
    std::printf("no CUDA device visible: skipping the NCCL collective test\n");
    return 77;
  }
  for (int world : {1, 2, std::min(devices, 4)}) launch(world, run_rank);
  std::printf("NCCL allreduce verified on %d device(s)\n", devices);
  return 0;
}
