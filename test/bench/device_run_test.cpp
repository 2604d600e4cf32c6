// What cohort-bench --device cuda stands on, tested without a GPU through the device runtime's
// CPU double (test/gpu/fake_device_runtime.hpp, whose "device memory" is host memory):
// Buffer::allocate on cuda and cuda_host (zeroed, freed through the runtime, refusals), and the
// runner's device staging: ops run on the device twins of the check's host buffers, the check's
// sentinel and input travel up and the output comes back down before counting. Also the
// runner's warm-up on host buffers with --allocate-per-call.

#include "device_memory.hpp"
#include "fake_device_runtime.hpp"
#include "implementation.hpp"
#include "runner.hpp"

#include <cohort/buffer.hpp>
#include <cohort/communicator.hpp>
#include <cohort/error.hpp>

#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

namespace {

using namespace cohort;
using cohort::test::FakeDeviceRuntime;

// The double never touches its store unless NCCL is used, which nothing here does.
std::shared_ptr<FakeDeviceRuntime> install_fake(int devices) {
  auto fake = std::make_shared<FakeDeviceRuntime>(nullptr, devices);
  gpu::install_device_runtime(fake);
  return fake;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

template <class Call>
Error error_of(Call&& call) {
  try {
    call();
  } catch (const Error& e) {
    return e;
  }
  FAIL("no cohort::Error was thrown");
  return Error(ErrorCode::Internal, "unreachable");
}

}  // namespace

TEST_CASE("Buffer::allocate on cuda:N is zeroed device memory freed through the runtime",
          "[bench][device]") {
  auto fake = install_fake(2);
  const std::size_t before = fake->live_allocations();
  {
    const Buffer buffer = Buffer::allocate(5, DType::Float64, Device::cuda(1));
    REQUIRE(buffer.device() == Device::cuda(1));
    REQUIRE(buffer.count() == 5);
    REQUIRE(buffer.shape() == std::vector<std::int64_t>{5});
    REQUIRE(buffer.owner() != nullptr);
    REQUIRE(fake->live_allocations() == before + 1);
    // Zeroed on the legacy default stream (0), 5 doubles = 40 bytes, and synchronised.
    const auto calls = fake->calls();
    REQUIRE(std::find(calls.begin(), calls.end(), "fill bytes=40 stream=0") != calls.end());
    const auto* bytes = static_cast<const unsigned char*>(buffer.data());
    for (std::size_t i = 0; i < 40; ++i) REQUIRE(bytes[i] == 0);
    const Buffer copy = buffer;  // shares the allocation
    REQUIRE(copy.data() == buffer.data());
  }
  REQUIRE(fake->live_allocations() == before);
}

TEST_CASE("Buffer::allocate on cuda_host is zeroed pinned memory freed through the runtime",
          "[bench][device]") {
  auto fake = install_fake(1);
  const std::size_t before = fake->live_allocations();
  {
    const Buffer buffer = Buffer::allocate(3, DType::Int32, Device{DeviceType::CUDAHost, 0});
    REQUIRE(buffer.device() == Device{DeviceType::CUDAHost, 0});
    REQUIRE(fake->live_allocations() == before + 1);
    for (int i = 0; i < 3; ++i) REQUIRE(buffer.data_as<std::int32_t>()[i] == 0);
  }
  REQUIRE(fake->live_allocations() == before);
}

TEST_CASE("Buffer::allocate of 0 elements on a device is an empty buffer", "[bench][device]") {
  auto fake = install_fake(1);
  const Buffer buffer = Buffer::allocate(0, DType::Float32, Device::cuda(0));
  REQUIRE(buffer.count() == 0);
  REQUIRE(buffer.nbytes() == 0);
  REQUIRE(buffer.device() == Device::cuda(0));
}

TEST_CASE("Buffer::allocate on cpu is the host allocation", "[bench][device]") {
  auto fake = install_fake(1);
  const std::size_t before = fake->live_allocations();
  const Buffer buffer = Buffer::allocate(4, DType::Float32, Device::cpu());
  REQUIRE(buffer.device() == Device::cpu());
  REQUIRE(fake->live_allocations() == before);  // not the runtime's memory
  for (int i = 0; i < 4; ++i) REQUIRE(buffer.data_as<float>()[i] == 0.0f);
}

TEST_CASE("Buffer::allocate refuses devices that do not exist, managed memory and overflow",
          "[bench][device]") {
  auto fake = install_fake(2);
  SECTION("a device id past the last device") {
    const Error e = error_of([] { Buffer::allocate(1, DType::Float32, Device::cuda(2)); });
    REQUIRE(e.code() == ErrorCode::Unsupported);
    REQUIRE(contains(e.message(), "there is no CUDA device 2 (2 visible"));
  }
  SECTION("no device at all") {
    fake->set_device_count(0);
    const Error e = error_of([] { Buffer::allocate(1, DType::Float32, Device::cuda(0)); });
    REQUIRE(e.code() == ErrorCode::Unsupported);
    REQUIRE(contains(e.message(), "no CUDA device is visible"));
    const Error pinned = error_of([] {
      Buffer::allocate(1, DType::Float32, Device{DeviceType::CUDAHost, 0});
    });
    REQUIRE(pinned.code() == ErrorCode::Unsupported);
  }
  SECTION("managed memory") {
    const Error e = error_of([] {
      Buffer::allocate(1, DType::Float32, Device{DeviceType::CUDAManaged, 0});
    });
    REQUIRE(e.code() == ErrorCode::InvalidArgument);
    REQUIRE(contains(e.message(), "managed memory is not offered"));
  }
  SECTION("a byte size past the int64 range") {
    const std::size_t count = std::numeric_limits<std::size_t>::max() / 4;
    const Error e = error_of([&] { Buffer::allocate(count, DType::Float64, Device::cuda(0)); });
    REQUIRE(e.code() == ErrorCode::InvalidArgument);
    REQUIRE(contains(e.message(), "exceed the int64 byte range"));
  }
  REQUIRE(fake->live_allocations() == 0);
}

TEST_CASE("Buffer::allocate without a device runtime says cohort was built without CUDA",
          "[bench][device]") {
  gpu::install_device_runtime(nullptr);
  // With CUDA built in, the default runtime is the real one, which may find a GPU: only a
  // build without CUDA has no runtime at all.
  if (gpu::built_with_cuda()) return;
  const Error e = error_of([] { Buffer::allocate(1, DType::Float32, Device::cuda(0)); });
  REQUIRE(e.code() == ErrorCode::Unsupported);
  REQUIRE(contains(e.message(), "cohort was built without CUDA"));
}

namespace {

using namespace cohort::bench;

// "Device memory" of the double: copies are plain memcpy, and every upload destination is
// remembered so a test can tell device twins from host staging.
class FakeDeviceMemory final : public DeviceMemory {
 public:
  Device device() const noexcept override { return Device::cuda(0); }
  std::string describe() const override { return "cuda:0 (fake)"; }
  void copy_to_device(void* dst, const void* src, std::size_t bytes) override {
    uploads.push_back(dst);
    std::memcpy(dst, src, bytes);
  }
  void copy_to_host(void* dst, const void* src, std::size_t bytes) override {
    ++downloads;
    std::memcpy(dst, src, bytes);
  }
  std::vector<void*> uploads;
  int downloads = 0;
};

// Allreduce over a world of one (the output is the input) on the device twins, or, when
// `writes` is false, an op that forgets to write its output.
class DeviceAllreduceOfOne final : public Implementation {
 public:
  DeviceAllreduceOfOne(FakeDeviceMemory& memory, bool writes) : memory_(memory), writes_(writes) {}
  std::string_view name() const noexcept override { return "fake"; }
  std::optional<std::string> unsupported(const OpCall&) const override { return std::nullopt; }
  void run(const OpCall& call) override {
    ++runs;
    REQUIRE(call.device == Device::cuda(0));
    // Both pointers lie in device twins: the whole in-place buffer, or in and out (and the
    // out-of-place output) were uploaded to before the op.
    const auto& up = memory_.uploads;
    REQUIRE(std::find(up.begin(), up.end(), call.in) != up.end());
    REQUIRE(std::find(up.begin(), up.end(), call.out) != up.end());
    if (writes_ && call.in != call.out)
      std::memcpy(call.out, call.in, call.in_count * dtype_size(call.dtype));
  }
  int runs = 0;

 private:
  FakeDeviceMemory& memory_;
  bool writes_;
};

std::vector<ResultRow> run_allreduce(Communicator& comm, FakeDeviceMemory& memory,
                                     Implementation& impl, std::uint64_t bytes) {
  RunSettings settings;
  settings.warmup = 1;
  settings.iters = 2;
  Runner runner(comm, settings, &memory);
  const Contender contenders[] = {{&impl, Algorithm::Auto}};
  return runner.run_size({BenchOp::Allreduce, DType::Float32, ReduceOp::Sum, 0}, bytes, contenders);
}

}  // namespace

TEST_CASE("the runner runs device ops on device twins and checks what comes back",
          "[bench][device]") {
  auto fake = install_fake(1);
  const std::shared_ptr<Communicator> comm = init();  // a world of one: no launcher here
  REQUIRE(comm->size() == 1);
  FakeDeviceMemory memory;

  SECTION("a correct op has no wrong elements, out of place and in place") {
    DeviceAllreduceOfOne impl(memory, true);
    const auto rows = run_allreduce(*comm, memory, impl, 64);
    REQUIRE(rows.size() == 1);
    REQUIRE(rows[0].skipped.empty());
    REQUIRE(rows[0].count == 16);
    REQUIRE(rows[0].out_of_place.measured);
    REQUIRE(rows[0].out_of_place.wrong == 0);
    REQUIRE(rows[0].in_place.measured);
    REQUIRE(rows[0].in_place.wrong == 0);
    // Per form: warmup 1 + iters 2 + the checked call.
    REQUIRE(impl.runs == 8);
    // Each form's checked output came back down.
    REQUIRE(memory.downloads == 2);
  }
  SECTION("an op that leaves the device output unwritten is caught by the host check") {
    // The sentinel travels up, stays, and comes back: all 16 elements are wrong.
    DeviceAllreduceOfOne impl(memory, false);
    const auto rows = run_allreduce(*comm, memory, impl, 64);
    REQUIRE(rows[0].out_of_place.wrong == 16);
    // In place over one rank the input already is the result.
    REQUIRE(rows[0].in_place.wrong == 0);
  }
  REQUIRE(fake->live_allocations() == 0);  // the runner's device buffers were released
}

namespace {

// Allreduce over a world of one on host buffers, counting its calls.
class HostAllreduceOfOne final : public Implementation {
 public:
  std::string_view name() const noexcept override { return "fake"; }
  std::optional<std::string> unsupported(const OpCall&) const override { return std::nullopt; }
  void run(const OpCall& call) override {
    ++runs;
    if (call.in != call.out) std::memcpy(call.out, call.in, call.in_count * dtype_size(call.dtype));
  }
  int runs = 0;
};

}  // namespace

TEST_CASE(
    "with --allocate-per-call every warm-up call allocates too, none runs on standing buffers",
    "[bench]") {
  const std::shared_ptr<Communicator> comm = init();  // a world of one: no launcher here
  HostAllreduceOfOne impl;
  RunSettings settings;
  settings.warmup = 3;
  settings.iters = 2;
  settings.allocate_per_call = true;
  Runner runner(*comm, settings);
  const Contender contenders[] = {{&impl, Algorithm::Auto}};
  const auto rows =
      runner.run_size({BenchOp::Allreduce, DType::Float32, ReduceOp::Sum, 0}, 64, contenders);
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].out_of_place.wrong == 0);
  CHECK(rows[0].in_place.wrong == 0);
  // Per form: 3 allocating warm-ups, 2 timed calls and the checked one; a warm-up on the
  // standing buffers first (the calls --min-time's count came from) would make it 9.
  CHECK(impl.runs == 2 * 6);
}
