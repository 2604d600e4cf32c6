// Every collective on real GPUs through the public Communicator, one process per rank: the
// buffers are device memory from the device runtime, inputs copied in and results copied out to
// be checked against values computed here by hand. Needs a CUDA device; without one (or without
// the CUDA runtime in this build) it exits 77, which meson reports as skipped, never as passed.

#include <cohort/buffer.hpp>
#include <cohort/communicator.hpp>
#include <cohort/environment.hpp>
#include <cohort/error.hpp>
#include <cohort/launch.hpp>

#include "gpu/device_runtime.hpp"
#include "train/kernels/float_kernels.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

using namespace cohort;

namespace {

/// Device memory holding `values` converted to `dtype` (small integers: exact in every dtype).
struct DeviceArray {
  gpu::DeviceRuntime& rt;
  DType dtype;
  std::size_t count;
  void* data = nullptr;
  std::shared_ptr<void> owner;

  DeviceArray(gpu::DeviceRuntime& runtime, DType type, std::size_t n, int device)
      : rt(runtime), dtype(type), count(n) {
    data = rt.allocate_device(std::max<std::size_t>(1, n * dtype_size(type)), device);
    owner = std::shared_ptr<void>(data, [&rt = rt](void* p) { rt.free_device(p); });
  }
  Buffer buffer(int device) const {
    return Buffer::view(data, {static_cast<std::int64_t>(count)}, dtype, Device::cuda(device), {},
                        0, owner);
  }
  void write(const std::vector<double>& values) {
    std::vector<std::byte> host(count * dtype_size(dtype));
    encode(values, host.data());
    rt.copy_async(data, host.data(), host.size(), gpu::StreamHandle{0});
    rt.synchronize_stream(gpu::StreamHandle{0});
  }
  std::vector<double> read() const {
    std::vector<std::byte> host(count * dtype_size(dtype));
    rt.copy_async(host.data(), data, host.size(), gpu::StreamHandle{0});
    rt.synchronize_stream(gpu::StreamHandle{0});
    return decode(host.data());
  }

 private:
  template <class T>
  static void put(const std::vector<double>& v, void* out) {
    for (std::size_t i = 0; i < v.size(); ++i) static_cast<T*>(out)[i] = static_cast<T>(v[i]);
  }
  template <class T>
  static std::vector<double> take(const void* in, std::size_t n) {
    std::vector<double> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<double>(static_cast<const T*>(in)[i]);
    return v;
  }
  void encode(const std::vector<double>& v, void* out) const {
    switch (dtype) {
      case DType::Int32: put<std::int32_t>(v, out); return;
      case DType::Int64: put<std::int64_t>(v, out); return;
      case DType::UInt8: put<std::uint8_t>(v, out); return;
      case DType::Float64: put<double>(v, out); return;
      default: {
        std::vector<float> f(v.begin(), v.end());
        train::kernels::convert(DType::Float32, f.data(), dtype, out, f.size());
      }
    }
  }
  std::vector<double> decode(const void* in) const {
    switch (dtype) {
      case DType::Int32: return take<std::int32_t>(in, count);
      case DType::Int64: return take<std::int64_t>(in, count);
      case DType::UInt8: return take<std::uint8_t>(in, count);
      case DType::Float64: return take<double>(in, count);
      default: {
        std::vector<float> f(count);
        train::kernels::convert(dtype, in, DType::Float32, f.data(), count);
        return {f.begin(), f.end()};
      }
    }
  }
};

void expect(const std::vector<double>& got, const std::vector<double>& want,
            const std::string& what) {
  for (std::size_t i = 0; i < want.size(); ++i)
    if (got[i] != want[i])
      throw std::runtime_error(what + ": element " + std::to_string(i) + " is " +
                               std::to_string(got[i]) + ", expected " + std::to_string(want[i]));
}

void run_rank(const Environment& env) {
  gpu::DeviceRuntime& rt = *gpu::device_runtime();
  const int device = env.local_rank % rt.device_count();
  auto comm = Communicator::create(env, connect_store(env));
  const int rank = comm->rank();
  const int n = comm->size();
  const auto un = static_cast<std::size_t>(n);
  for (DType dtype : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16, DType::Int32,
                      DType::Int64, DType::UInt8}) {
    const std::string name(dtype_name(dtype));
    const std::size_t count = 1001;  // odd: no even split anywhere
    DeviceArray in(rt, dtype, count, device);
    DeviceArray out(rt, dtype, count, device);
    std::vector<double> mine(count), sum(count);
    for (std::size_t i = 0; i < count; ++i) {
      mine[i] = double(rank + 1 + i % 5);
      sum[i] = double(n * (n + 1) / 2 + n * (i % 5));
    }
    in.write(mine);
    comm->allreduce(in.buffer(device), out.buffer(device), ReduceOp::Sum);
    expect(out.read(), sum, "allreduce " + name);
    comm->reduce(in.buffer(device), out.buffer(device), ReduceOp::Max, 0);
    if (rank == 0) {
      std::vector<double> max(count);
      for (std::size_t i = 0; i < count; ++i) max[i] = double(n + i % 5);
      expect(out.read(), max, "reduce max " + name);
    }
    out.write(rank == 0 ? mine : std::vector<double>(count, 0));
    comm->broadcast(out.buffer(device), 0);
    std::vector<double> root_values(count);
    for (std::size_t i = 0; i < count; ++i) root_values[i] = double(1 + i % 5);
    expect(out.read(), root_values, "broadcast " + name);

    DeviceArray block(rt, dtype, 3, device);
    block.write({double(rank), double(rank), double(rank)});
    DeviceArray all(rt, dtype, 3 * un, device);
    comm->allgather(block.buffer(device), all.buffer(device));
    std::vector<double> gathered(3 * un);
    for (std::size_t i = 0; i < 3 * un; ++i) gathered[i] = double(i / 3);
    expect(all.read(), gathered, "allgather " + name);
    comm->reduce_scatter(all.buffer(device), block.buffer(device), ReduceOp::Sum);
    expect(block.read(), std::vector<double>(3, double(n * rank)), "reduce_scatter " + name);
    DeviceArray swapped(rt, dtype, 3 * un, device);
    comm->alltoall(all.buffer(device), swapped.buffer(device));
    std::vector<double> from_each(3 * un, double(rank));
    expect(swapped.read(), from_each, "alltoall " + name);
  }
  comm->barrier(CollectiveOptions{.stream = Stream{0}});
}

}  // namespace

int main() {
  gpu::DeviceRuntime* rt = gpu::device_runtime();
  const int devices = rt ? rt->device_count() : 0;
  if (devices == 0) {
    std::printf("no CUDA runtime or no CUDA device visible: skipping the GPU collective test\n");
    return 77;
  }
  // NCCL refuses two ranks of one communicator on one device: at most one rank per device.
  for (int world : {1, 2, 3, 4})
    if (world <= devices) launch(world, run_rank);
  std::printf("every collective verified on %d device(s)\n", devices);
  return 0;
}
