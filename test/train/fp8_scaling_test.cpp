// Fp8Scaling and amax() on real processes (world sizes 1-5): the amax agreed by allreduce(Max),
// scale = fp8_max / amax / 2^margin for both fp8 formats, the history window (most recent or
// max), the amax values that keep the previous scale, and bad arguments. Expected scales are
// written out by hand (TRAINING.md "FP8 scaling", Transformer Engine's delayed scaling).

#include <cohort/error.hpp>
#include <cohort/train/precision.hpp>

#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <deque>
#include <limits>
#include <string>
#include <vector>

#include "train_test_support.hpp"

namespace {

using namespace cohort;
using namespace cohort::test;
using cohort::train::AmaxCompute;
using cohort::train::Fp8Scaling;
using cohort::train::Fp8ScalingOptions;

bool same(float a, float b) {
  return (std::isnan(a) && std::isnan(b)) || a == b;
}

void expect_scale(float got, float want, const std::string& what) {
  RANK_CHECK(same(got, want), what << ": scale " << got << ", expected " << want);
}

void expect_history(const Fp8Scaling& s, const std::vector<float>& want, const std::string& what) {
  const std::deque<float>& h = s.amax_history();
  RANK_CHECK(h.size() == want.size(), what << ": history has " << h.size() << " entries");
  for (std::size_t i = 0; i < want.size(); ++i)
    RANK_CHECK(same(h[i], want[i]),
               what << ": history[" << i << "] " << h[i] << ", expected " << want[i]);
}

Fp8ScalingOptions options(DType format, int margin, std::size_t history, AmaxCompute compute) {
  Fp8ScalingOptions o;
  o.format = format;
  o.margin = margin;
  o.history_length = history;
  o.amax_compute = compute;
  return o;
}

}  // namespace

TEST_CASE("the amax is agreed by every rank and sets the same e4m3 scale everywhere",
          "[train][fp8][multiproc]") {
  const int size = GENERATE(1, 2, 3, 4, 5);
  CAPTURE(size);
  REQUIRE_NOTHROW(run_ranks(size, [](const Environment& env) {
    auto comm = test_world(env);
    const int n = comm->size();
    // Rank r saw 3.5 * (r + 1); the agreed amax is 3.5 * n. With 2 ranks this is TRAINING.md's
    // case: 3.5 and 7 -> 7 -> 448 / 7 = 64.
    const float agreed[] = {3.5f, 7.0f, 10.5f, 14.0f, 17.5f};
    const float scale[] = {128.0f, 64.0f, 448.0f / 10.5f, 32.0f, 25.6f};
    const float mine = 3.5f * static_cast<float>(comm->rank() + 1);

    Fp8Scaling fp8(comm);
    RANK_CHECK(fp8.scale() == 1.0f && fp8.fp8_max() == 448.0f, "initial state");
    expect_scale(fp8.update(mine), scale[n - 1], "scalar amax");
    expect_scale(fp8.scale(), scale[n - 1], "scale()");
    RANK_CHECK(fp8.scale_inverse() == 1.0f / scale[n - 1], "scale_inverse " << fp8.scale_inverse());
    expect_history(fp8, {agreed[n - 1]}, "after one update");

    // The same from tensors: rank r holds [-(3.5 (r + 1)), 1] (amax takes |x|).
    Fp8Scaling from_tensor(comm);
    const Buffer t = owned<float>({-mine, 1.0f}, DType::Float32);
    expect_scale(from_tensor.update(t), scale[n - 1], "tensor amax");

    // A NaN on the last rank reaches every rank and keeps the previous scale there.
    const bool last = comm->rank() == n - 1;
    expect_scale(fp8.update(last ? kNaN : 1.0f), scale[n - 1], "NaN amax on the last rank");
    expect_history(fp8, {agreed[n - 1], kNaN}, "NaN recorded");
  }));
}

TEST_CASE("e5m2, margin, history window, and amax values that keep the scale",
          "[train][fp8][multiproc]") {
  REQUIRE_NOTHROW(run_ranks(1, [](const Environment& env) {
    auto comm = test_world(env);
    constexpr auto E4 = DType::Float8E4M3;
    constexpr auto E5 = DType::Float8E5M2;

    Fp8Scaling e5(comm, options(E5, 0, 1024, AmaxCompute::MostRecent));
    RANK_CHECK(e5.fp8_max() == 57344.0f, "e5m2 max " << e5.fp8_max());
    expect_scale(e5.update(7.0f), 8192.0f, "e5m2 amax 7");
    expect_scale(e5.update(3.5f), 16384.0f, "e5m2 amax 3.5");
    Fp8Scaling e5_margin(comm, options(E5, 2, 1024, AmaxCompute::MostRecent));
    expect_scale(e5_margin.update(7.0f), 2048.0f, "e5m2 margin 2");
    Fp8Scaling e4_margin(comm, options(E4, 1, 1024, AmaxCompute::MostRecent));
    expect_scale(e4_margin.update(7.0f), 32.0f, "e4m3 margin 1 halves 64");

    // A decreasing amax over a window of 3: Max holds 8 until it leaves the window.
    Fp8Scaling windowed(comm, options(E4, 0, 3, AmaxCompute::Max));
    Fp8Scaling recent(comm, options(E4, 0, 3, AmaxCompute::MostRecent));
    const float amaxes[] = {8.0f, 4.0f, 2.0f, 1.0f};
    const float by_max[] = {56.0f, 56.0f, 56.0f, 112.0f};
    const float by_recent[] = {56.0f, 112.0f, 224.0f, 448.0f};
    for (int i = 0; i < 4; ++i) {
      expect_scale(windowed.update(amaxes[i]), by_max[i], "max window " + std::to_string(i));
      expect_scale(recent.update(amaxes[i]), by_recent[i], "most recent " + std::to_string(i));
    }
    expect_history(windowed, {4.0f, 2.0f, 1.0f}, "window of 3");

    // amax 0 (an all-zero tensor), inf and NaN keep the previous scale: first the initial 1.
    Fp8Scaling kept(comm);
    expect_scale(kept.update(0.0f), 1.0f, "amax 0 before any scale");
    expect_scale(kept.update(7.0f), 64.0f, "amax 7");
    expect_scale(kept.update(0.0f), 64.0f, "amax 0");
    expect_scale(kept.update(kInf), 64.0f, "amax inf");
    expect_scale(kept.update(kNaN), 64.0f, "amax NaN");
    expect_history(kept, {0.0f, 7.0f, 0.0f, kInf, kNaN}, "every amax is recorded");

    // Max ignores NaN entries (TE's fmaxf): [7, NaN] scales by 7, not by the old 14.
    Fp8Scaling nan_window(comm, options(E4, 0, 2, AmaxCompute::Max));
    expect_scale(nan_window.update(14.0f), 32.0f, "window 14");
    expect_scale(nan_window.update(7.0f), 32.0f, "window [14, 7]");
    expect_scale(nan_window.update(kNaN), 64.0f, "window [7, NaN]");

    // A subnormal amax: 448 / 2^-149 overflows float; the scale is float's largest value.
    Fp8Scaling tiny(comm);
    expect_scale(tiny.update(0x1p-149f), std::numeric_limits<float>::max(), "subnormal amax");
  }));
}

TEST_CASE("amax() of host buffers", "[train][fp8][multiproc]") {
  REQUIRE_NOTHROW(run_ranks(1, [](const Environment&) {
    using cohort::train::amax;
    expect_scale(amax(owned<float>({-3.0f, 2.0f, 0.5f}, DType::Float32)), 3.0f, "f32");
    expect_scale(amax(owned<float>({1.0f, kNaN, -kInf}, DType::Float32)), kNaN, "f32 with NaN");
    expect_scale(amax(owned<float>({-kInf, 1.0f}, DType::Float32)), kInf, "f32 with -inf");
    expect_scale(amax(owned<double>({0.25, -6.5}, DType::Float64)), 6.5f, "f64");
    // half -5 (0xC500) and 1 (0x3C00); bfloat16 -7 (0xC0E0); e4m3 -448 (0xFE) and NaN (0x7F).
    expect_scale(amax(owned<std::uint16_t>({0xC500, 0x3C00}, DType::Float16)), 5.0f, "f16");
    expect_scale(amax(owned<std::uint16_t>({0xC0E0}, DType::BFloat16)), 7.0f, "bf16");
    expect_scale(amax(owned<std::uint8_t>({0xFE}, DType::Float8E4M3)), 448.0f, "e4m3");
    expect_scale(amax(owned<std::uint8_t>({0x38, 0x7F}, DType::Float8E4M3)), kNaN, "e4m3 NaN");
    expect_scale(amax(Buffer::allocate(0, DType::Float32)), 0.0f, "empty");

    expect_error([] { amax(owned<std::int32_t>({1}, DType::Int32)); }, ErrorCode::InvalidArgument,
                 {"int32"}, "integer buffer");
    std::vector<float> storage{1.0f, 2.0f, 3.0f, 4.0f};
    expect_error([&] { amax(Buffer::view(storage.data(), 4, DType::Float32, Device::cuda(0))); },
                 ErrorCode::Unsupported, {"cuda:0"}, "CUDA buffer");
    expect_error(
        [&] { amax(Buffer::view(storage.data(), {2}, DType::Float32, Device::cpu(), {2})); },
        ErrorCode::InvalidArgument, {"not contiguous"}, "strided buffer");
  }));
}

TEST_CASE("an amax refused on one rank is an error on every rank, and none waits",
          "[train][fp8][multiproc]") {
  const int size = GENERATE(2, 3);
  CAPTURE(size);
  REQUIRE_NOTHROW(run_ranks(size, [](const Environment& env) {
    auto comm = test_world(env);
    const int last = comm->size() - 1;
    const bool refuses = comm->rank() == last;
    Fp8Scaling fp8(comm);
    // The last rank's amax is negative: it names its value, the others name it.
    if (refuses) {
      expect_error([&] { fp8.update(-2.0f); }, ErrorCode::InvalidArgument, {"local_amax", "-2"},
                   "its own negative amax");
    } else {
      expect_error([&] { fp8.update(5.0f); }, ErrorCode::InvalidArgument,
                   {"rank " + std::to_string(last), "refused"}, "a peer's negative amax");
    }
    // The same from a tensor amax() refuses (an integer one) on the last rank only.
    const Buffer integer = owned<std::int32_t>({3}, DType::Int32);
    const Buffer floating = owned<float>({5.0f}, DType::Float32);
    if (refuses) {
      expect_error([&] { fp8.update(integer); }, ErrorCode::InvalidArgument, {"int32"},
                   "its own integer tensor");
    } else {
      expect_error([&] { fp8.update(floating); }, ErrorCode::InvalidArgument,
                   {"rank " + std::to_string(last), "refused"}, "a peer's integer tensor");
    }
    RANK_CHECK(fp8.amax_history().empty() && fp8.scale() == 1.0f, "refused updates recorded");
    // Still in step: an agreed update, 448 / 7 = 64.
    expect_scale(fp8.update(refuses ? 7.0f : 1.0f), 64.0f, "after the refusals");
  }));
}

TEST_CASE("bad Fp8Scaling options and amax values are InvalidArgument", "[train][fp8][multiproc]") {
  REQUIRE_NOTHROW(run_ranks(1, [](const Environment& env) {
    auto comm = test_world(env);
    constexpr auto A = ErrorCode::InvalidArgument;
    const auto refused = [&](const Fp8ScalingOptions& o,
                             std::initializer_list<std::string_view> needles, const char* what) {
      expect_error([&] { Fp8Scaling s(comm, o); }, A, needles, what);
    };
    refused(options(DType::Float16, 0, 1024, AmaxCompute::MostRecent), {"format", "half"},
            "half format");
    refused(options(DType::Float8E4M3, -1, 1024, AmaxCompute::MostRecent), {"margin", "-1"},
            "negative margin");
    refused(options(DType::Float8E4M3, 200, 1024, AmaxCompute::MostRecent), {"margin 200"},
            "margin past float's range");
    refused(options(DType::Float8E4M3, 0, 0, AmaxCompute::Max), {"history_length"},
            "empty history");
    Fp8ScalingOptions negative_timeout;
    negative_timeout.timeout = std::chrono::milliseconds(-5);
    refused(negative_timeout, {"timeout", "-5"}, "negative timeout");
    Fp8ScalingOptions zero_timeout;
    zero_timeout.timeout = std::chrono::milliseconds(0);
    refused(zero_timeout, {"timeout must be positive", "got 0 ms"}, "zero timeout");
    expect_error([] { Fp8Scaling s(nullptr); }, A, {"communicator"}, "null communicator");

    Fp8Scaling fp8(comm);
    expect_error([&] { fp8.update(-1.0f); }, A, {"local_amax", "-1"}, "negative amax");
    expect_error([&] { fp8.update(owned<std::int32_t>({3}, DType::Int32)); }, A, {"int32"},
                 "integer tensor");
    RANK_CHECK(fp8.amax_history().empty() && fp8.scale() == 1.0f, "refused updates recorded");
  }));
}
