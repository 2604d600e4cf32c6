// GradScaler on real processes (world sizes 1-5): the fused unscale, the found-inf agreement that
// makes every rank skip together, growth / back-off / hysteresis arithmetic, checkpoint state,
// misuse and bad arguments, and a disabled scaler that provably never communicates. Every
// expected value is written out by hand (TRAINING.md "Mixed precision" and torch's GradScaler).

#include <cohort/error.hpp>
#include <cohort/train/precision.hpp>

#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "train_test_support.hpp"

namespace {

using namespace cohort;
using namespace cohort::test;
using cohort::train::GradScaler;
using cohort::train::GradScalerOptions;
using cohort::train::GradScalerState;

Buffer f32(const std::vector<float>& values) {
  return owned(values, DType::Float32);
}

// Exact comparison (every expected value here is exactly representable); NaN matches NaN.
template <class T>
void expect_exact(const Buffer& b, const std::vector<T>& want, const std::string& what) {
  RANK_CHECK(b.count() == want.size(), what << ": count " << b.count());
  for (std::size_t i = 0; i < want.size(); ++i) {
    const T got = b.data_as<T>()[i];
    const bool both_nan =
        std::isnan(static_cast<double>(got)) && std::isnan(static_cast<double>(want[i]));
    RANK_CHECK(both_nan || got == want[i],
               what << ": element " << i << " is " << got << ", expected " << want[i]);
  }
}

void expect_bits(const Buffer& b, const std::vector<std::uint16_t>& want, const std::string& what) {
  RANK_CHECK(b.count() == want.size(), what << ": count " << b.count());
  for (std::size_t i = 0; i < want.size(); ++i) {
    const std::uint16_t got = b.data_as<std::uint16_t>()[i];
    RANK_CHECK(got == want[i], what << ": element " << i << " is 0x" << std::hex << got
                                    << ", expected 0x" << want[i]);
  }
}

void expect_state(const GradScaler& s, float scale, std::int64_t growth, std::int64_t hysteresis,
                  const std::string& what) {
  const GradScalerState st = s.state();
  RANK_CHECK(st.scale == scale && s.scale() == scale,
             what << ": scale " << st.scale << ", expected " << scale);
  RANK_CHECK(st.growth_tracker == growth,
             what << ": growth tracker " << st.growth_tracker << ", expected " << growth);
  RANK_CHECK(st.hysteresis_tracker == hysteresis, what << ": hysteresis tracker "
                                                       << st.hysteresis_tracker << ", expected "
                                                       << hysteresis);
}

GradScalerOptions starting_at(float init_scale) {
  GradScalerOptions o;
  o.init_scale = init_scale;
  return o;
}

}  // namespace

TEST_CASE("unscale multiplies f32, f64 and f16 gradients by 1/scale in place",
          "[train][grad_scaler][multiproc]") {
  const int size = GENERATE(1, 3);
  CAPTURE(size);
  REQUIRE_NOTHROW(run_ranks(size, [](const Environment& env) {
    auto comm = test_world(env);
    GradScaler scaler(comm);  // torch's defaults: 65536, x2 every 2000 clean steps, x0.5
    RANK_CHECK(scaler.enabled() && scaler.scale() == 65536.0f, "scale " << scaler.scale());

    Buffer g32 = f32({65536.0f, 131072.0f, -32768.0f});
    Buffer g64 = owned<double>({65536.0, 131072.0, -32768.0}, DType::Float64);
    // half bits: 65504 (the largest half), 2048, -0.5, 2^-14 (the smallest normal half).
    Buffer g16 = owned<std::uint16_t>({0x7BFF, 0x6800, 0xB800, 0x0400}, DType::Float16);
    const std::vector<Buffer> grads{g32, g64, g16};

    scaler.unscale(grads);
    expect_exact<float>(g32, {1.0f, 2.0f, -0.5f}, "f32 unscaled");
    expect_exact<double>(g64, {1.0, 2.0, -0.5}, "f64 unscaled");
    // 65504/65536 = 2047 * 2^-11 (exact), 2^-5, -2^-17 (a half subnormal: 128 * 2^-24), and
    // 2^-30, below half the smallest subnormal, which becomes +0 (why engines keep f32 grads).
    expect_bits(g16, {0x3BFF, 0x2800, 0x8080, 0x0000}, "f16 unscaled");
    RANK_CHECK(!scaler.found_inf(), "found_inf on finite gradients");

    // step() after unscale() must not divide a second time.
    RANK_CHECK(scaler.step(grads), "step refused finite gradients");
    expect_exact<float>(g32, {1.0f, 2.0f, -0.5f}, "f32 after step");
    scaler.update();
    RANK_CHECK(!scaler.step_was_skipped(), "clean step reported as skipped");
    expect_state(scaler, 65536.0f, 1, 1, "after one clean step");
    RANK_CHECK(!scaler.found_inf(), "found_inf survives update()");
  }));
}

TEST_CASE("one rank's inf makes every rank skip and back off", "[train][grad_scaler][multiproc]") {
  REQUIRE_NOTHROW(run_ranks(2, [](const Environment& env) {
    auto comm = test_world(env);
    GradScaler scaler(comm, starting_at(4.0f));
    const bool r0 = comm->rank() == 0;

    // TRAINING.md: scale 4, rank 0 [4, 8], rank 1 [inf, 0] -> both skip, then scale 2.
    Buffer g = r0 ? f32({4.0f, 8.0f}) : f32({kInf, 0.0f});
    scaler.unscale(std::vector<Buffer>{g});
    // Rank 0's gradients were finite and are still multiplied (as torch does).
    if (r0) expect_exact<float>(g, {1.0f, 2.0f}, "rank 0 unscaled");
    if (!r0) expect_exact<float>(g, {kInf, 0.0f}, "rank 1 unscaled");
    RANK_CHECK(scaler.found_inf(), "found_inf not agreed on rank " << comm->rank());
    RANK_CHECK(!scaler.step(std::vector<Buffer>{g}), "rank " << comm->rank() << " stepped");
    scaler.update();
    RANK_CHECK(scaler.step_was_skipped(), "step_was_skipped false");
    // The default hysteresis budget of 1 is spent (0) until the scale grows again.
    expect_state(scaler, 2.0f, 0, 0, "after the overflow");

    // step() alone unscales: [2, 4] at scale 2 -> [1, 2], steps, and counts a clean step.
    Buffer clean = f32({2.0f, 4.0f});
    RANK_CHECK(scaler.step(std::vector<Buffer>{clean}), "clean step refused");
    expect_exact<float>(clean, {1.0f, 2.0f}, "unscaled by step()");
    scaler.update();
    RANK_CHECK(!scaler.step_was_skipped(), "clean step reported as skipped");
    expect_state(scaler, 2.0f, 1, 0, "after the clean step");

    // Groups agree separately: group 1 overflows on rank 0 only, group 0 is clean everywhere.
    Buffer a = f32({2.0f});
    Buffer b = r0 ? f32({-kInf}) : f32({6.0f});
    RANK_CHECK(scaler.step(std::vector<Buffer>{a}, 0), "group 0 refused");
    RANK_CHECK(!scaler.step(std::vector<Buffer>{b}, 1), "group 1 stepped on " << comm->rank());
    RANK_CHECK(!scaler.found_inf(0) && scaler.found_inf(1), "per-group found_inf");
    scaler.update();
    RANK_CHECK(scaler.step_was_skipped(), "an overflowing group must mark the step skipped");
    expect_state(scaler, 1.0f, 0, 0, "after group 1's overflow");
  }));
}

TEST_CASE("a NaN on the last rank alone skips the step on every rank",
          "[train][grad_scaler][multiproc]") {
  const int size = GENERATE(1, 2, 3, 4, 5);
  CAPTURE(size);
  REQUIRE_NOTHROW(run_ranks(size, [](const Environment& env) {
    auto comm = test_world(env);
    GradScaler scaler(comm, starting_at(8.0f));
    const bool last = comm->rank() == comm->size() - 1;
    const float r = static_cast<float>(comm->rank());

    Buffer g = f32({8.0f, -16.0f * r});
    RANK_CHECK(scaler.step(std::vector<Buffer>{g}), "clean step refused");
    expect_exact<float>(g, {1.0f, -2.0f * r}, "clean unscale");
    scaler.update();
    expect_state(scaler, 8.0f, 1, 1, "after the clean step");

    Buffer h = last ? f32({kNaN, 8.0f}) : f32({8.0f, 24.0f});
    scaler.unscale(std::vector<Buffer>{h});
    RANK_CHECK(scaler.found_inf(), "rank " << comm->rank() << " missed the NaN");
    if (last) expect_exact<float>(h, {kNaN, 1.0f}, "last rank unscaled");
    if (!last) expect_exact<float>(h, {1.0f, 3.0f}, "other rank unscaled");
    RANK_CHECK(!scaler.step(std::vector<Buffer>{h}), "rank " << comm->rank() << " stepped");
    scaler.update();
    RANK_CHECK(scaler.step_was_skipped(), "step_was_skipped false");
    expect_state(scaler, 4.0f, 0, 0, "after the NaN");
  }));
}

TEST_CASE("growth after growth_interval clean steps, never to inf",
          "[train][grad_scaler][multiproc]") {
  REQUIRE_NOTHROW(run_ranks(1, [](const Environment& env) {
    auto comm = test_world(env);
    GradScalerOptions o;
    o.growth_interval = 3;
    GradScaler scaler(comm, o);
    const float grown[] = {65536.0f, 65536.0f, 131072.0f};
    const std::int64_t tracker[] = {1, 2, 0};
    for (int i = 0; i < 3; ++i) {
      Buffer g = f32({1.0f});
      RANK_CHECK(scaler.step(std::vector<Buffer>{g}), "clean step " << i << " refused");
      scaler.update();
      expect_state(scaler, grown[i], tracker[i], 1, "clean update " + std::to_string(i + 1));
    }

    // 2^127 * 2 overflows float: the scale stays, the tracker still restarts.
    GradScalerOptions top;
    top.init_scale = 0x1p127f;
    top.growth_interval = 1;
    GradScaler capped(comm, top);
    Buffer g = f32({0x1p127f});
    RANK_CHECK(capped.step(std::vector<Buffer>{g}), "step at 2^127 refused");
    expect_exact<float>(g, {1.0f}, "unscaled at 2^127");
    capped.update();
    expect_state(capped, 0x1p127f, 0, 1, "growth past float's range");

    // -inf and f16 inf are found as well as NaN.
    for (Buffer bad : {f32({1.0f, -kInf}), owned<std::uint16_t>({0x3C00, 0x7C00}, DType::Float16),
                       f32({kNaN})}) {
      GradScaler s(comm);
      RANK_CHECK(!s.step(std::vector<Buffer>{bad}),
                 "non-finite " << dtype_name(bad.dtype()) << " gradient stepped");
      RANK_CHECK(s.found_inf(), "found_inf false");
    }
  }));
}

TEST_CASE("hysteresis tolerates overflows until its budget is spent; growth refills it",
          "[train][grad_scaler][multiproc]") {
  REQUIRE_NOTHROW(run_ranks(2, [](const Environment& env) {
    auto comm = test_world(env);
    GradScalerOptions o;
    o.init_scale = 1024.0f;
    o.growth_interval = 2;
    o.hysteresis = 2;
    GradScaler scaler(comm, o);
    // Only rank 1 overflows; the agreement makes rank 0 follow the same schedule.
    const auto step = [&](bool overflow) {
      const float bad = comm->rank() == 1 && overflow ? kInf : 1.0f;
      Buffer g = f32({bad});
      const bool stepped = scaler.step(std::vector<Buffer>{g});
      RANK_CHECK(stepped != overflow, "step returned " << stepped);
      scaler.update();
      RANK_CHECK(scaler.step_was_skipped() == overflow, "step_was_skipped");
    };
    step(true);
    expect_state(scaler, 1024.0f, 0, 1, "first overflow: tolerated");
    step(true);
    expect_state(scaler, 512.0f, 0, 0, "second overflow: budget spent, back off");
    step(true);
    expect_state(scaler, 256.0f, 0, 0, "third overflow: backs off again");
    step(false);
    expect_state(scaler, 256.0f, 1, 0, "clean: budget not refilled yet");
    step(false);
    expect_state(scaler, 512.0f, 0, 2, "growth refills the budget");
    step(true);
    expect_state(scaler, 512.0f, 0, 1, "overflow after growth: tolerated again");
  }));
}

TEST_CASE("state() and load_state() resume a scaler exactly", "[train][grad_scaler][multiproc]") {
  REQUIRE_NOTHROW(run_ranks(2, [](const Environment& env) {
    auto comm = test_world(env);
    GradScalerOptions o;
    o.init_scale = 1024.0f;
    o.growth_interval = 3;
    o.hysteresis = 2;
    const auto step = [&](GradScaler& s, bool overflow) {
      Buffer g = f32({comm->rank() == 1 && overflow ? kNaN : 2.0f});
      s.step(std::vector<Buffer>{g});
      s.update();
    };

    GradScaler original(comm, o);
    step(original, false);
    step(original, false);
    const GradScalerState saved = original.state();
    RANK_CHECK(
        saved.scale == 1024.0f && saved.growth_tracker == 2 && saved.hysteresis_tracker == 2,
        "saved " << saved.scale << " " << saved.growth_tracker << " " << saved.hysteresis_tracker);

    GradScalerOptions fresh = o;
    fresh.init_scale = 8.0f;  // overwritten by the checkpoint
    GradScaler resumed(comm, fresh);
    resumed.load_state(saved);
    expect_state(resumed, 1024.0f, 2, 2, "right after load_state");

    struct Expected {
      bool overflow;
      float scale;
      std::int64_t growth, hysteresis;
    };
    const Expected schedule[] = {
        {false, 2048.0f, 0, 2},  // third clean step: growth
        {true, 2048.0f, 0, 1},   // tolerated
        {true, 1024.0f, 0, 0},   // backs off
        {false, 1024.0f, 1, 0}, {false, 1024.0f, 2, 0},
        {false, 2048.0f, 0, 2},  // growth refills hysteresis
        {true, 2048.0f, 0, 1},
    };
    int i = 0;
    for (const Expected& e : schedule) {
      step(original, e.overflow);
      step(resumed, e.overflow);
      const std::string what = "step " + std::to_string(i++);
      expect_state(original, e.scale, e.growth, e.hysteresis, "original " + what);
      expect_state(resumed, e.scale, e.growth, e.hysteresis, "resumed " + what);
    }
  }));
}

TEST_CASE("calls out of order are InvalidUsage and leave the scaler usable",
          "[train][grad_scaler][multiproc]") {
  // Both ranks make the same mistakes: the misuse must be refused before any communication.
  REQUIRE_NOTHROW(run_ranks(2, [](const Environment& env) {
    auto comm = test_world(env);
    GradScaler scaler(comm, starting_at(4.0f));
    constexpr auto U = ErrorCode::InvalidUsage;

    expect_error([&] { scaler.update(); }, U, {"no inf checks were recorded"},
                 "update before unscale");

    Buffer g = f32({8.0f});
    const std::vector<Buffer> grads{g};
    scaler.unscale(grads);
    expect_error([&] { scaler.unscale(grads); }, U, {"group 0", "already unscaled"},
                 "second unscale");
    expect_exact<float>(g, {2.0f}, "divided once only");
    RANK_CHECK(scaler.step(grads), "step refused");
    expect_error([&] { scaler.step(grads); }, U, {"group 0", "step() was already called"},
                 "second step");
    expect_error([&] { scaler.unscale(grads); }, U, {"group 0", "already stepped"},
                 "unscale after step");
    scaler.update();

    // A new step starts clean; another group is independent of group 0.
    Buffer h = f32({4.0f});
    scaler.unscale(std::vector<Buffer>{h}, 7);
    expect_error([&] { scaler.unscale(std::vector<Buffer>{h}, 7); }, U, {"group 7"},
                 "group 7 unscaled twice");
    RANK_CHECK(!scaler.found_inf(0) && !scaler.found_inf(7), "found_inf");
    RANK_CHECK(scaler.step(grads, 0), "group 0 refused");
    expect_exact<float>(g, {0.5f}, "group 0 unscaled by step");

    // update(new_scale) ends the step without touching the trackers.
    expect_error([&] { scaler.update(0.0f); }, ErrorCode::InvalidArgument, {"new_scale", "0"},
                 "zero new_scale");
    expect_error([&] { scaler.update(kNaN); }, ErrorCode::InvalidArgument, {"nan"},
                 "NaN new_scale");
    expect_error([&] { scaler.update(kInf); }, ErrorCode::InvalidArgument, {"inf"},
                 "inf new_scale");
    scaler.update(1024.0f);
    RANK_CHECK(!scaler.step_was_skipped(), "explicit update of a clean step");
    expect_state(scaler, 1024.0f, 1, 1, "after update(1024)");
    scaler.unscale(grads);  // groups are Ready again
    scaler.update(16.0f);   // update(new_scale) needs no step, like torch
    expect_state(scaler, 16.0f, 1, 1, "after update(16)");
  }));
}

TEST_CASE("bad options and gradients are refused before any gradient changes",
          "[train][grad_scaler][multiproc]") {
  REQUIRE_NOTHROW(run_ranks(1, [](const Environment& env) {
    auto comm = test_world(env);
    constexpr auto A = ErrorCode::InvalidArgument;
    const auto refused = [&](GradScalerOptions o, std::initializer_list<std::string_view> needles,
                             const char* what) {
      expect_error([&] { GradScaler s(comm, o); }, A, needles, what);
    };
    GradScalerOptions o;
    o.init_scale = 0.0f;
    refused(o, {"init_scale", "0"}, "zero init_scale");
    o.init_scale = -1.0f;
    refused(o, {"init_scale", "-1"}, "negative init_scale");
    o.init_scale = kInf;
    refused(o, {"init_scale", "inf"}, "inf init_scale");
    o.init_scale = 1e-39f;  // 1/scale overflows float
    refused(o, {"init_scale"}, "init_scale without a float reciprocal");
    o = {};
    o.growth_factor = 1.0f;
    refused(o, {"growth_factor", "1"}, "growth_factor 1");
    o.growth_factor = kInf;
    refused(o, {"growth_factor", "inf"}, "inf growth_factor");
    o = {};
    o.backoff_factor = 1.0f;
    refused(o, {"backoff_factor", "1"}, "backoff_factor 1");
    o.backoff_factor = 0.0f;
    refused(o, {"backoff_factor", "0"}, "backoff_factor 0");
    o = {};
    o.growth_interval = 0;
    refused(o, {"growth_interval", "0"}, "growth_interval 0");
    o = {};
    o.hysteresis = 0;
    refused(o, {"hysteresis", "0"}, "hysteresis 0");
    o = {};
    o.gradient_dtype = DType::Int32;
    refused(o, {"gradient_dtype", "int32"}, "integer gradient_dtype");
    o = {};
    o.timeout = std::chrono::milliseconds(-1);
    refused(o, {"timeout", "-1"}, "negative timeout");
    expect_error([] { GradScaler s(nullptr); }, A, {"communicator"}, "null communicator");

    // Gradient lists: each bad entry is named by index; the good entry before it is untouched.
    GradScaler scaler(comm, starting_at(2.0f));
    Buffer good = f32({4.0f, 6.0f});
    Buffer ints = owned<std::int32_t>({4, 6}, DType::Int32);
    // Host memory behind a CUDA-labelled view: it must be refused before anything reads it.
    std::vector<float> storage{4.0f, 6.0f, 8.0f, 10.0f};
    const Buffer on_gpu = Buffer::view(storage.data(), 2, DType::Float32, Device::cuda(0));
    const Buffer read_only = f32({4.0f}).as_read_only();
    const Buffer strided = Buffer::view(storage.data(), {2}, DType::Float32, Device::cpu(), {2});
    expect_error(
        [&] {
          scaler.unscale(std::vector<Buffer>{good, ints});
        },
        A, {"gradient 1", "int32"}, "integer gradient");
    expect_error(
        [&] {
          scaler.unscale(std::vector<Buffer>{good, on_gpu});
        },
        ErrorCode::Unsupported, {"gradient 1", "cuda:0"}, "CUDA gradient");
    expect_error(
        [&] {
          scaler.step(std::vector<Buffer>{good, read_only});
        },
        A, {"gradient 1", "read-only"}, "read-only gradient");
    expect_error(
        [&] {
          scaler.unscale(std::vector<Buffer>{good, strided});
        },
        A, {"gradient 1", "not contiguous"}, "strided gradient");
    expect_exact<float>(good, {4.0f, 6.0f}, "good gradient after refused calls");
    expect_exact<std::int32_t>(ints, {4, 6}, "integer gradient after refused calls");
    expect_exact<float>(Buffer::view(storage.data(), 4, DType::Float32), {4.0f, 6.0f, 8.0f, 10.0f},
                        "viewed storage after refused calls");

    // Refused calls recorded nothing: the group can still be unscaled once, then updated.
    expect_error([&] { scaler.update(); }, ErrorCode::InvalidUsage, {"no inf checks"},
                 "update after refused calls");
    scaler.unscale(std::vector<Buffer>{good});
    expect_exact<float>(good, {2.0f, 3.0f}, "good gradient unscaled");
    scaler.update();

    GradScalerState s = scaler.state();
    s.scale = 0.0f;
    expect_error([&] { scaler.load_state(s); }, A, {"scale", "0"}, "zero loaded scale");
    s = scaler.state();
    s.growth_tracker = -1;
    expect_error([&] { scaler.load_state(s); }, A, {"growth_tracker", "-1"}, "negative tracker");
    s = scaler.state();
    s.hysteresis_tracker = -2;
    expect_error([&] { scaler.load_state(s); }, A, {"hysteresis_tracker", "-2"},
                 "negative hysteresis tracker");
    expect_state(scaler, 2.0f, 1, 1, "state kept after refused loads");
  }));
}

TEST_CASE("a disabled scaler has scale 1, always steps and never communicates",
          "[train][grad_scaler][multiproc]") {
  REQUIRE_NOTHROW(run_ranks(2, [](const Environment& env) {
    auto comm = test_world(env);
    std::vector<GradScalerOptions> disabled(4);
    disabled[0].gradient_dtype = DType::BFloat16;
    disabled[1].gradient_dtype = DType::Float8E4M3;
    disabled[2].gradient_dtype = DType::Float8E5M2;
    disabled[3].enabled = false;
    for (const GradScalerOptions& o : disabled) {
      GradScaler scaler(comm, o);
      RANK_CHECK(!scaler.enabled() && scaler.scale() == 1.0f, "scale " << scaler.scale());
      // Only rank 0 drives the scaler, five full steps with an inf in its gradients. Had any
      // call communicated, rank 1's allreduce below would pair with it and not give 3.
      if (comm->rank() == 0) {
        Buffer g = f32({3.0f, kInf});
        for (int i = 0; i < 5; ++i) {
          scaler.unscale(std::vector<Buffer>{g});
          scaler.unscale(std::vector<Buffer>{g});  // no misuse checks either, as in torch
          RANK_CHECK(scaler.step(std::vector<Buffer>{g}), "disabled scaler skipped");
          RANK_CHECK(!scaler.found_inf(), "disabled scaler found an inf");
          scaler.update();
          scaler.update(8.0f);
        }
        expect_exact<float>(g, {3.0f, kInf}, "gradients of a disabled scaler");
        RANK_CHECK(!scaler.step_was_skipped() && scaler.scale() == 1.0f, "disabled state");
      }
      Buffer sum = f32({static_cast<float>(comm->rank() + 1)});
      comm->allreduce(sum, ReduceOp::Sum);
      expect_exact<float>(sum, {3.0f}, "allreduce after the disabled scaler");
    }

    GradScalerOptions half;
    half.gradient_dtype = DType::Float16;
    GradScalerOptions single;
    single.gradient_dtype = DType::Float32;
    RANK_CHECK(GradScaler(comm, half).enabled() && GradScaler(comm, single).enabled(),
               "f16 / f32 gradients must keep the scaler enabled");
  }));
}

TEST_CASE("one rank's rejected gradients are an error on every rank, not a wait",
          "[train][grad_scaler][multiproc]") {
  const int size = GENERATE(2, 3);
  CAPTURE(size);
  REQUIRE_NOTHROW(run_ranks(size, [](const Environment& env) {
    auto comm = test_world(env);
    const int r = comm->rank();
    GradScaler scaler(comm, starting_at(2.0f));
    Buffer good = f32({4.0f, 6.0f});
    if (r == 1) {
      Buffer ints = owned<std::int32_t>({4, 6}, DType::Int32);
      expect_error(
          [&] {
            scaler.unscale(std::vector<Buffer>{good, ints});
          },
          ErrorCode::InvalidArgument, {"gradient 1", "int32"}, "rank 1's own error");
      expect_exact(good, std::vector<float>{4.0f, 6.0f}, "rank 1's gradients untouched");
    } else {
      expect_error([&] { scaler.unscale(std::vector<Buffer>{good}); }, ErrorCode::InvalidArgument,
                   {"rank 1 rejected"}, "a peer's rejection");
    }
    // Every rank is still in step: the next collective pairs up.
    float one = 1.0f;
    comm->allreduce(Buffer::view(&one, 1, DType::Float32), ReduceOp::Sum);
    RANK_CHECK(one == static_cast<float>(env.world_size), "allreduce after the error: " << one);
    // The engine steps (a skip everywhere, no rank communicating) and ends the step: every rank
    // backs off alike (2 * 0.5).
    RANK_CHECK(scaler.found_inf(), "the refused step does not count as found-inf");
    if (r == 1)
      expect_error([&] { scaler.unscale(std::vector<Buffer>{good}); }, ErrorCode::InvalidUsage,
                   {"refused"}, "unscaling the refused group again");
    RANK_CHECK(!scaler.step(std::vector<Buffer>{good}), "step() after the refusal did not skip");
    scaler.update();
    RANK_CHECK(scaler.scale() == 1.0f, "scale after the refused step: " << scaler.scale());
    RANK_CHECK(scaler.step_was_skipped(), "the refused step was not reported skipped");
    // And the next step runs on every rank (its agreement pairs up).
    Buffer next = f32({4.0f, 6.0f});
    RANK_CHECK(scaler.step(std::vector<Buffer>{next}), "the next step was skipped");
    expect_exact(next, std::vector<float>{4.0f, 6.0f}, "the next step's gradients (scale 1)");
    scaler.update();
  }));
}
