// The training layer on device buffers, on CPU: each rank installs the device runtime's test
// double (test/gpu/fake_device_runtime.hpp), whose "device memory" is host memory viewed as
// cuda:0 and whose kernels are the host kernels, then drives cast, the grad scaler, clipping and
// the gradient synchroniser with device buffers in real processes. The checks are that the
// device path is taken (the fake's call log), that values are what a plain computation here
// says, and that refusals name the buffer. Expected values are written out by hand.

#include <cohort/error.hpp>
#include <cohort/train/gradients.hpp>
#include <cohort/train/mesh.hpp>
#include <cohort/train/precision.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "fake_device_runtime.hpp"
#include "gpu/device_runtime.hpp"
#include "train_test_support.hpp"

namespace {

using namespace cohort;
using namespace cohort::test;

std::shared_ptr<FakeDeviceRuntime> install_fake(const Environment& env) {
  auto fake = std::make_shared<FakeDeviceRuntime>(connect_store(env), 1);
  gpu::install_device_runtime(fake);
  return fake;
}

// Fake device memory holding `values` (as T), seen as a cuda:0 buffer of `dtype`.
template <class T>
Buffer on_device(FakeDeviceRuntime& fake, const std::vector<T>& values, DType dtype) {
  const std::size_t bytes = std::max<std::size_t>(1, values.size() * sizeof(T));
  void* p = fake.allocate_device(bytes, 0);
  if (!values.empty()) std::memcpy(p, values.data(), values.size() * sizeof(T));
  auto owner = std::shared_ptr<void>(p, [&fake](void* q) { fake.free_device(q); });
  return Buffer::view(p, {static_cast<std::int64_t>(values.size())}, dtype, Device::cuda(0), {}, 0,
                      owner);
}

std::size_t count_calls(const FakeDeviceRuntime& fake, std::string_view prefix) {
  const auto calls = fake.calls();
  return static_cast<std::size_t>(std::count_if(calls.begin(), calls.end(), [&](const auto& c) {
    return std::string_view(c).substr(0, prefix.size()) == prefix;
  }));
}

template <class T>
void expect_exact(const Buffer& b, const std::vector<T>& want, const std::string& what) {
  RANK_CHECK(b.count() == want.size(), what << ": count " << b.count());
  for (std::size_t i = 0; i < want.size(); ++i) {
    const T got = b.data_as<T>()[i];
    const bool both_nan = std::isnan(got) && std::isnan(want[i]);
    RANK_CHECK(both_nan || got == want[i],
               what << ": element " << i << " is " << got << ", expected " << want[i]);
  }
}

TEST_CASE("cast and cast_to on device buffers run the device convert", "[train][device]") {
  run_ranks(1, [](const Environment& env) {
    auto fake = install_fake(env);
    // f32 -> f16 by hand: 1 = 0x3c00, -0.5 = 0xb800, 65520 overflows to inf (0x7c00), 2^-24 is
    // the smallest subnormal (0x0001).
    const Buffer in =
        on_device(*fake, std::vector<float>{1.0f, -0.5f, 65520.0f, 0x1p-24f}, DType::Float32);
    const Buffer out = on_device(*fake, std::vector<std::uint16_t>(4, 0xffff), DType::Float16);
    fake->clear_calls();
    train::cast(in, out);
    RANK_CHECK(count_calls(*fake, "convert float->half count=4") == 1, "one device convert");
    const std::uint16_t* h = out.data_as<std::uint16_t>();
    RANK_CHECK(h[0] == 0x3c00 && h[1] == 0xb800 && h[2] == 0x7c00 && h[3] == 0x0001,
               "bits " << std::hex << h[0] << " " << h[1] << " " << h[2] << " " << h[3]);

    const Buffer back = on_device(*fake, std::vector<float>(4, 0.0f), DType::Float32);
    train::cast(out, back);
    expect_exact(back, std::vector<float>{1.0f, -0.5f, INFINITY, 0x1p-24f}, "round trip");

    // Mixing host and device memory is refused naming both.
    std::vector<float> host(4);
    expect_error([&] { train::cast(in, Buffer::view(host.data(), 4, DType::Float32)); },
                 ErrorCode::InvalidArgument, {"the input", "cuda:0", "the output", "cpu"},
                 "mixed cast");
    // A strided device input is not walked on the device.
    const Buffer strided = Buffer::view(in.data(), {2}, DType::Float32, Device::cuda(0), {2});
    const Buffer two = on_device(*fake, std::vector<float>(2, 0.0f), DType::Float32);
    expect_error([&] { train::cast(strided, two); }, ErrorCode::Unsupported, {"strided", "cuda:0"},
                 "strided device cast");
    // Partial overlap on the device is refused like on the host.
    const Buffer shifted =
        Buffer::view(static_cast<float*>(in.data()) + 1, 3, DType::Float32, Device::cuda(0));
    const Buffer first3 = Buffer::view(in.data(), 3, DType::Float64, Device::cuda(0));
    expect_error([&] { train::cast(shifted, first3); }, ErrorCode::InvalidArgument, {"overlaps"},
                 "overlapping device cast");
    // Elements off their alignment (DLPack allows any byte offset) would fault on a device.
    const Buffer misaligned =
        Buffer::view(static_cast<std::byte*>(in.data()) + 2, {2}, DType::Float32, Device::cuda(0));
    fake->clear_calls();
    expect_error([&] { train::cast(misaligned, two); }, ErrorCode::InvalidArgument,
                 {"the input", "cuda:0", "4-byte elements"}, "misaligned device cast");
    RANK_CHECK(fake->calls().empty(), "a kernel ran on misaligned memory");
    // The gradient helpers take the same check (clip_grad_norm scales in a kernel).
    std::vector<Buffer> grads{misaligned};
    expect_error([&] { train::clip_grad_norm(grads, 1.0); }, ErrorCode::InvalidArgument,
                 {"gradient 0", "4-byte elements"}, "misaligned device gradient");
    RANK_CHECK(fake->calls().empty(), "a kernel ran on a misaligned gradient");
  });
}

TEST_CASE("managed memory runs on the device with device memory, on the host with host memory",
          "[train][device]") {
  run_ranks(1, [](const Environment& env) {
    auto fake = install_fake(env);
    auto managed = [&](std::vector<float> values) {
      const Buffer b = on_device(*fake, values, DType::Float32);
      return Buffer::view(b.data(), {static_cast<std::int64_t>(values.size())}, DType::Float32,
                          Device{DeviceType::CUDAManaged, 0}, {}, 0, b.owner());
    };
    const Buffer a = managed({1.5f, -2.0f});
    const Buffer b = managed({0.0f, 0.0f});
    fake->clear_calls();
    train::cast(a, b);
    RANK_CHECK(count_calls(*fake, "convert") == 1, "managed to managed: one device convert");
    expect_exact(b, std::vector<float>{1.5f, -2.0f}, "managed copy");

    // Managed and pinned memory are both host addressable: the host kernels, no device call.
    std::vector<double> pinned_storage(2);
    const Buffer pinned =
        Buffer::view(pinned_storage.data(), {2}, DType::Float64, Device{DeviceType::CUDAHost, 0});
    fake->clear_calls();
    train::cast(a, pinned);
    RANK_CHECK(count_calls(*fake, "convert") == 0, "managed to pinned stays on the host");
    RANK_CHECK(pinned_storage[0] == 1.5 && pinned_storage[1] == -2.0, "pinned values");
  });
}

TEST_CASE("cast_to a device input gives device memory", "[train][device]") {
  run_ranks(1, [](const Environment& env) {
    auto fake = install_fake(env);
    const Buffer in = on_device(*fake, std::vector<double>{0.1, 3.0}, DType::Float64);
    const Buffer out = train::cast_to(in, DType::Float32);
    RANK_CHECK(out.device() == Device::cuda(0), "device " << out.device().to_string());
    // 0.1 rounded once to float is 0x3dcccccd.
    RANK_CHECK(std::bit_cast<std::uint32_t>(out.data_as<float>()[0]) == 0x3dcccccdu, "0.1");
    RANK_CHECK(out.data_as<float>()[1] == 3.0f, "3");
  });
}

TEST_CASE("GradScaler unscales device gradients and every rank skips on one rank's inf",
          "[train][device]") {
  run_ranks(2, [](const Environment& env) {
    auto fake = install_fake(env);
    auto comm = test_world(env);
    train::GradScalerOptions options;
    options.init_scale = 1024.0f;
    train::GradScaler scaler(comm, options);
    const bool overflow = comm->rank() == 1;
    const Buffer a =
        on_device(*fake, std::vector<float>{1024.0f, -2048.0f, 512.0f}, DType::Float32);
    const Buffer b = on_device(
        *fake, std::vector<double>{overflow ? std::numeric_limits<double>::infinity() : 3072.0},
        DType::Float64);
    const std::vector<Buffer> grads{a, b};
    fake->clear_calls();
    scaler.unscale(grads);
    RANK_CHECK(count_calls(*fake, "convert float->float count=3") == 1, "device unscale of a");
    RANK_CHECK(count_calls(*fake, "convert double->double count=1") == 1, "device unscale of b");
    expect_exact(a, std::vector<float>{1.0f, -2.0f, 0.5f}, "a unscaled");
    expect_exact(b, std::vector<double>{overflow ? INFINITY : 3.0}, "b unscaled");
    RANK_CHECK(scaler.found_inf(), "rank " << comm->rank() << " must see rank 1's inf");
    RANK_CHECK(!scaler.step(grads), "the step is skipped everywhere");
    scaler.update();
    RANK_CHECK(scaler.scale() == 512.0f, "backed off to " << scaler.scale());
  });
}

TEST_CASE("clip_grad_norm on device gradients", "[train][device]") {
  run_ranks(1, [](const Environment& env) {
    auto fake = install_fake(env);
    // 2-norm of {3, 4, 12} is 13 exactly; max_norm 6.5 scales by 6.5 / (13 + 1e-6), rounded to
    // float for the float gradient and kept in f64 for the f64 one.
    const Buffer a = on_device(*fake, std::vector<float>{3.0f, 4.0f}, DType::Float32);
    const Buffer b = on_device(*fake, std::vector<double>{12.0}, DType::Float64);
    fake->clear_calls();
    const double total = train::clip_grad_norm(std::vector<Buffer>{a, b}, 6.5);
    RANK_CHECK(total == 13.0, "total " << total);
    RANK_CHECK(count_calls(*fake, "norm_part") == 2, "two device norm parts");
    RANK_CHECK(count_calls(*fake, "scale") == 2, "two device scales");
    const auto factor = static_cast<float>(6.5 / (13.0 + 1e-6));
    expect_exact(a, std::vector<float>{3.0f * factor, 4.0f * factor}, "a clipped");
    expect_exact(b, std::vector<double>{12.0 * (6.5 / (13.0 + 1e-6))}, "b clipped in f64");

    // Infinity norm: max |g| = 7 is under 14, nothing changes.
    const Buffer c = on_device(*fake, std::vector<float>{-7.0f, 2.0f}, DType::Float32);
    train::ClipOptions inf_norm;
    inf_norm.norm_type = train::kInfinityNorm;
    RANK_CHECK(train::clip_grad_norm(std::vector<Buffer>{c}, 14.0, inf_norm) == 7.0, "max 7");
    expect_exact(c, std::vector<float>{-7.0f, 2.0f}, "c untouched");

    // Host and device gradients in one call: 1-norm |3| + |-4| = 7.
    std::vector<float> host{3.0f};
    const Buffer d = on_device(*fake, std::vector<float>{-4.0f}, DType::Float32);
    train::ClipOptions one_norm;
    one_norm.norm_type = 1.0;
    const double mixed = train::clip_grad_norm(
        std::vector<Buffer>{Buffer::view(host.data(), 1, DType::Float32), d}, 100.0, one_norm);
    RANK_CHECK(mixed == 7.0, "mixed total " << mixed);

    // A NaN on the device makes the total NaN, as on the host.
    const Buffer e = on_device(*fake, std::vector<float>{1.0f, NAN}, DType::Float32);
    RANK_CHECK(std::isnan(train::clip_grad_norm(std::vector<Buffer>{e}, 1.0)), "NaN total");

    // Other p have no device kernel; clip_grad_value has no device clamp.
    train::ClipOptions three;
    three.norm_type = 3.0;
    expect_error([&] { train::clip_grad_norm(std::vector<Buffer>{a}, 1.0, three); },
                 ErrorCode::Unsupported, {"gradient 0", "cuda:0", "norm_type 3"}, "p = 3");
    expect_error([&] { train::clip_grad_value(std::vector<Buffer>{a}, 1.0); },
                 ErrorCode::Unsupported, {"gradient 0", "cuda:0"}, "clip_grad_value");
  });
}

TEST_CASE("clip_grad_norm of device shards agrees the norm across the shard group",
          "[train][device]") {
  run_ranks(2, [](const Environment& env) {
    auto fake = install_fake(env);
    auto comm = test_world(env);
    // Rank 0 holds {3}, rank 1 holds {4}: the whole model's 2-norm is 5.
    const Buffer g =
        on_device(*fake, std::vector<float>{comm->rank() == 0 ? 3.0f : 4.0f}, DType::Float32);
    train::ClipOptions options;
    options.shard_group = comm;
    const double total = train::clip_grad_norm(std::vector<Buffer>{g}, 100.0, options);
    RANK_CHECK(total == 5.0, "total " << total);
  });
}

// Rank r's gradient element i is (r + 1) * (i + 1); the average over n ranks is
// (i + 1) * (n + 1) / 2, exact in float for these sizes.
void synchronise_device_gradients(const Environment& env, bool contiguous) {
  auto fake = install_fake(env);
  auto comm = test_world(env);
  const int n = comm->size();
  const float r1 = static_cast<float>(comm->rank() + 1);
  std::vector<Buffer> grads;
  if (contiguous) {
    // Views of one allocation: the bucket is the gradients' own memory.
    const Buffer all =
        on_device(*fake, std::vector<float>{r1, 2 * r1, 3 * r1, 4 * r1, 5 * r1}, DType::Float32);
    grads.push_back(
        Buffer::view(all.data(), {2}, DType::Float32, Device::cuda(0), {}, 0, all.owner()));
    grads.push_back(Buffer::view(static_cast<float*>(all.data()) + 2, {3}, DType::Float32,
                                 Device::cuda(0), {}, 0, all.owner()));
  } else {
    // Separate allocations: the bucket is staged in device memory.
    grads.push_back(on_device(*fake, std::vector<float>{r1, 2 * r1}, DType::Float32));
    grads.push_back(on_device(*fake, std::vector<float>{r1, 2 * r1, 3 * r1}, DType::Float32));
  }
  train::GradientSynchronizer sync(comm, grads);
  fake->clear_calls();
  RANK_CHECK(sync.begin_micro_step(), "the only micro-step of the window");
  sync.mark_ready(1);
  sync.mark_ready(0);
  sync.finish();
  RANK_CHECK(count_calls(*fake, "allreduce") >= 1, "the bucket went through (fake) NCCL");
  if (!contiguous) RANK_CHECK(count_calls(*fake, "convert") == 4, "two packs and two unpacks");
  const float half = static_cast<float>(n + 1) / 2.0f;
  if (contiguous) {
    expect_exact(grads[0], std::vector<float>{half, 2 * half}, "gradient 0");
    expect_exact(grads[1], std::vector<float>{3 * half, 4 * half, 5 * half}, "gradient 1");
  } else {
    expect_exact(grads[0], std::vector<float>{half, 2 * half}, "gradient 0");
    expect_exact(grads[1], std::vector<float>{half, 2 * half, 3 * half}, "gradient 1");
  }
}

TEST_CASE("GradientSynchronizer averages device gradients in place", "[train][device]") {
  for (int n : {2, 3}) {
    INFO("world " << n);
    REQUIRE_NOTHROW(run_ranks(
        n, [](const Environment& env) { synchronise_device_gradients(env, /*contiguous=*/true); }));
  }
}

TEST_CASE("GradientSynchronizer averages device gradients through device staging",
          "[train][device]") {
  REQUIRE_NOTHROW(run_ranks(
      2, [](const Environment& env) { synchronise_device_gradients(env, /*contiguous=*/false); }));
}

TEST_CASE("GradientSynchronizer in a world of one zeroes unready device gradients",
          "[train][device]") {
  run_ranks(1, [](const Environment& env) {
    auto fake = install_fake(env);
    auto comm = test_world(env);
    const Buffer a = on_device(*fake, std::vector<float>{5.0f, 6.0f}, DType::Float32);
    const Buffer b = on_device(*fake, std::vector<float>{7.0f}, DType::Float32);
    train::GradientSyncOptions options;
    options.allow_unready = true;
    train::GradientSynchronizer sync(comm, std::vector<Buffer>{a, b}, options);
    sync.begin_micro_step();
    sync.mark_ready(0);
    fake->clear_calls();
    sync.finish();
    RANK_CHECK(count_calls(*fake, "fill") == 1, "the unready gradient zeroed on the device");
    expect_exact(a, std::vector<float>{5.0f, 6.0f}, "ready gradient");
    expect_exact(b, std::vector<float>{0.0f}, "unready gradient");
  });
}

TEST_CASE("amax and Fp8Scaling on a device buffer", "[train][device]") {
  run_ranks(2, [](const Environment& env) {
    auto fake = install_fake(env);
    auto comm = test_world(env);
    // max |x| by hand: 6 on rank 0, 9 on rank 1; the agreed amax is 9.
    const Buffer t = on_device(
        *fake,
        comm->rank() == 0 ? std::vector<float>{1.0f, -6.0f} : std::vector<float>{-9.0f, 2.0f},
        DType::Float32);
    fake->clear_calls();
    const float local = train::amax(t);
    RANK_CHECK(local == (comm->rank() == 0 ? 6.0f : 9.0f), "local amax " << local);
    RANK_CHECK(count_calls(*fake, "norm_part float count=2") == 1, "device max |x|");
    train::Fp8ScalingOptions options;
    options.format = DType::Float8E4M3;
    train::Fp8Scaling scaling(comm, options);
    scaling.update(t);
    RANK_CHECK(scaling.amax_history().back() == 9.0f, "agreed " << scaling.amax_history().back());
    // scale = 448 / 9 (margin 0), rounded to float.
    RANK_CHECK(scaling.scale() == static_cast<float>(448.0 / 9.0), "scale " << scaling.scale());
    // An empty device buffer: 0, as on the host.
    RANK_CHECK(train::amax(on_device(*fake, std::vector<float>{}, DType::Float32)) == 0.0f,
               "empty amax");
  });
}

TEST_CASE("all_to_all on device buffers goes through the device path", "[train][device]") {
  run_ranks(2, [](const Environment& env) {
    auto fake = install_fake(env);
    auto comm = test_world(env);
    // r0 [0,1,2,3] and r1 [4,5,6,7] become [0,1,4,5] and [2,3,6,7] (mesh.hpp's example).
    const float base = comm->rank() == 0 ? 0.0f : 4.0f;
    const Buffer in =
        on_device(*fake, std::vector<float>{base, base + 1, base + 2, base + 3}, DType::Float32);
    fake->clear_calls();
    const Buffer out = train::all_to_all(*comm, in);
    RANK_CHECK(out.device() == Device::cuda(0), "device " << out.device().to_string());
    RANK_CHECK(count_calls(*fake, "send") + count_calls(*fake, "recv") >= 2, "fake NCCL send/recv");
    expect_exact(out,
                 comm->rank() == 0 ? std::vector<float>{0.0f, 1.0f, 4.0f, 5.0f}
                                   : std::vector<float>{2.0f, 3.0f, 6.0f, 7.0f},
                 "all_to_all");
  });
}

TEST_CASE("device gradients on two places, or without a visible device, are refused",
          "[train][device]") {
  run_ranks(1, [](const Environment& env) {
    auto fake = install_fake(env);
    auto comm = test_world(env);
    std::vector<float> host{1.0f};
    const Buffer dev = on_device(*fake, std::vector<float>{1.0f}, DType::Float32);
    expect_error(
        [&] {
          train::GradientSynchronizer s(
              comm, std::vector<Buffer>{dev, Buffer::view(host.data(), 1, DType::Float32)});
        },
        ErrorCode::InvalidArgument, {"gradient 1", "cpu", "gradient 0", "cuda:0"},
        "host and device gradients");

    fake->set_device_count(0);
    expect_error([&] { train::cast(dev, dev); }, ErrorCode::Unsupported,
                 {"the input", "cuda:0", "no CUDA device"}, "cast without a device");
    train::GradScalerOptions options;
    train::GradScaler scaler(comm, options);
    expect_error([&] { scaler.unscale(std::vector<Buffer>{dev}); }, ErrorCode::Unsupported,
                 {"gradient 0", "cuda:0", "no CUDA device"}, "unscale without a device");
  });
}

}  // namespace
