// GradientSynchronizer's bucketed allreduce on real processes (world sizes 1-5): averages
// whatever order each rank marks its gradients in (the launch order is the same everywhere),
// f16/bf16 communication, unready gradients (an error on every rank, or zeros with
// allow_unready), bad arguments and call order; and broadcast_parameters. Expected values are
// written by hand from TRAINING.md or computed here by plain loops.

#include <cohort/error.hpp>
#include <cohort/train/gradients.hpp>

#include <catch2/catch.hpp>

#include "algorithms/engines/single_copy.hpp"
#include "comm/rank_checks.hpp"
#include "core/mappable_memory.hpp"
#include "support/cross_process_reads.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <thread>
#include <vector>

namespace {

using namespace cohort;
using namespace cohort::test;
using train::GradientSynchronizer;
using train::GradientSyncOptions;

constexpr std::chrono::milliseconds kTimeout{20000};  // a misordered allreduce fails, not hangs

Buffer f32_filled(std::size_t count, float value) {
  Buffer b = Buffer::allocate(count, DType::Float32);
  std::fill_n(b.data_as<float>(), count, value);
  return b;
}

void fill(const Buffer& b, float value) {
  std::fill_n(b.data_as<float>(), b.count(), value);
}

// Every element of f32 gradient `what` equals `want` (within 1e-5 relative).
void expect_all(const Buffer& grad, double want, const std::string& what) {
  expect_values(
      grad, 0, grad.count(), [&](std::size_t) { return want; }, what);
}

// As expect_all, within `tolerance` (for values that went through f16).
void expect_near(const Buffer& grad, double want, double tolerance, const std::string& what) {
  for (std::size_t j = 0; j < grad.count(); ++j) {
    const double got = grad.data_as<float>()[j];
    RANK_CHECK(std::fabs(got - want) <= tolerance,
               what << ": element " << j << " is " << got << ", expected " << want);
  }
}

/// Whether this kernel gives mappable memory (a memfd); the layer falls back to ordinary memory
/// where it does not.
bool memfd_works() {
  try {
    Buffer::allocate_mappable(1, DType::Float32);
    return true;
  } catch (const Error&) {
    return false;
  }
}

/// f32 gradients of `counts` elements, zero: views of one contiguous_gradients() block (so their
/// buckets are reduced in place), or separate allocations (staged buckets).
std::vector<Buffer> zeroed_gradients(const std::vector<std::size_t>& counts, bool contiguous) {
  if (contiguous) return train::contiguous_gradients(counts, DType::Float32);
  std::vector<Buffer> grads;
  for (std::size_t count : counts) grads.push_back(f32_filled(count, 0));
  return grads;
}

GradientSyncOptions with_timeout(GradientSyncOptions options = {}) {
  options.timeout = kTimeout;
  return options;
}

}  // namespace

TEST_CASE("g_i = r + i averages to i + (world - 1) / 2 whatever order each rank marks in",
          "[train][gradients][multiproc]") {
  const int size = GENERATE(1, 2, 3, 4, 5);
  CAPTURE(size);
  REQUIRE_NOTHROW(run_ranks(size, [](const Environment& env) {
    auto comm = world(env);
    const int r = comm->rank();
    // TRAINING.md's sizes: with DDP's default caps the buckets are [[3, 2], [1, 0]].
    std::vector<Buffer> grads;
    for (std::size_t count : {300000u, 10u, 262144u, 5u}) grads.push_back(f32_filled(count, 0));
    GradientSynchronizer sync(comm, grads, with_timeout());
    RANK_CHECK((sync.buckets() == std::vector<std::vector<std::size_t>>{{3, 2}, {1, 0}}),
               "bucket layout");
    // Rank 0 marks in backward's order, rank 1 in registration order (its first bucket completes
    // last), the others rotated.
    std::vector<std::size_t> order = {3, 2, 1, 0};
    if (r == 1) order = {0, 1, 2, 3};
    if (r >= 2) std::rotate(order.begin(), order.begin() + r % 4, order.end());
    for (int step = 0; step < 2; ++step) {
      RANK_CHECK(sync.begin_micro_step(), "accumulation_steps 1 syncs every micro-step");
      for (std::size_t i = 0; i < grads.size(); ++i) fill(grads[i], static_cast<float>(r + i));
      for (std::size_t i : order) sync.mark_ready(i);
      sync.finish();
      const double mean_rank = (env.world_size - 1) / 2.0;
      for (std::size_t i = 0; i < grads.size(); ++i) {
        expect_all(grads[i], static_cast<double>(i) + mean_rank,
                   "step " + std::to_string(step) + " gradient " + std::to_string(i));
      }
    }
  }));
}

TEST_CASE("buckets start in the same order on every rank (many buckets, random orders, threads)",
          "[train][gradients][multiproc]") {
  // Gradients of distinct sizes and small caps make many buckets of distinct sizes: if any rank
  // started them in its own readiness order, allreduces of different buckets would pair up and
  // fail (count mismatch, timeout) or give wrong values.
  const int size = GENERATE(2, 3, 5);
  CAPTURE(size);
  REQUIRE_NOTHROW(run_ranks(size, [](const Environment& env) {
    auto comm = world(env);
    const int r = comm->rank();
    const int w = comm->size();
    constexpr std::size_t kGrads = 12;
    std::vector<Buffer> grads;
    for (std::size_t i = 0; i < kGrads; ++i) grads.push_back(f32_filled(3 + 2 * i, 0));
    GradientSyncOptions options = with_timeout();
    options.first_bucket_cap_bytes = 16;
    options.bucket_cap_bytes = 40;
    GradientSynchronizer sync(comm, grads, options);
    RANK_CHECK(sync.buckets().size() >= 6, "expected many buckets, got " << sync.buckets().size());
    std::mt19937 random(static_cast<unsigned>(1000 + r));
    for (int step = 0; step < 6; ++step) {
      sync.begin_micro_step();
      // g_i[j] = (r + 1)(i + 1) + j % 3, so the mean is (i + 1)(w + 1) / 2 + j % 3.
      for (std::size_t i = 0; i < kGrads; ++i) {
        for (std::size_t j = 0; j < grads[i].count(); ++j) {
          grads[i].data_as<float>()[j] = static_cast<float>((r + 1) * (i + 1) + j % 3);
        }
      }
      std::vector<std::size_t> order(kGrads);
      std::iota(order.begin(), order.end(), 0);
      std::shuffle(order.begin(), order.end(), random);
      if (step % 2 == 0) {
        for (std::size_t i : order) sync.mark_ready(i);
      } else {
        // mark_ready from three threads at once (the engine's autograd hooks may do that).
        std::vector<std::thread> threads;
        for (std::size_t t = 0; t < 3; ++t) {
          threads.emplace_back([&, t] {
            for (std::size_t k = t; k < order.size(); k += 3) sync.mark_ready(order[k]);
          });
        }
        for (auto& thread : threads) thread.join();
      }
      sync.finish();
      for (std::size_t i = 0; i < kGrads; ++i) {
        expect_values(
            grads[i], 0, grads[i].count(),
            [&](std::size_t j) { return (i + 1) * (w + 1) / 2.0 + static_cast<double>(j % 3); },
            "step " + std::to_string(step) + " gradient " + std::to_string(i));
      }
    }
  }));
}

TEST_CASE("f16 communication pre-divides: 40000 on 2 ranks stays 40000; bf16 rounds",
          "[train][gradients][multiproc]") {
  const int size = GENERATE(1, 2);
  CAPTURE(size);
  REQUIRE_NOTHROW(run_ranks(size, [](const Environment& env) {
    auto comm = world(env);
    Buffer grad = f32_filled(1000, 40000.0f);
    GradientSyncOptions options = with_timeout();
    options.communication_dtype = DType::Float16;
    GradientSynchronizer half(comm, {grad}, options);
    half.begin_micro_step();
    half.mark_ready(0);
    half.finish();
    // 40000 / 2 = 20000 is exact in f16 and so is the sum (without the division: 80000 -> inf).
    expect_all(grad, 40000.0, "f16 communication");

    // bf16 keeps 8 significant bits: 40000 = 156.25 x 256 rounds to 156 x 256 = 39936 (on 2
    // ranks 20000 = 156.25 x 128 rounds to 19968, summed to 39936 as well).
    fill(grad, 40000.0f);
    options.communication_dtype = DType::BFloat16;
    GradientSynchronizer brain(comm, {grad}, options);
    brain.begin_micro_step();
    brain.mark_ready(0);
    brain.finish();
    expect_all(grad, 39936.0, "bf16 communication");
  }));
}

TEST_CASE("a gradient left unready fails finish() on every rank, then training goes on",
          "[train][gradients][multiproc]") {
  const int size = GENERATE(1, 2, 3);
  // Staged: separate 64-byte-aligned allocations of 16 bytes are never adjacent, so the buckets
  // [3,2] [1,0] copy through staging buffers. In place: one allocation, every bucket ([3] [2]
  // [1] [0]) is the gradients' own memory.
  const bool staged = GENERATE(true, false);
  CAPTURE(size, staged);
  REQUIRE_NOTHROW(run_ranks(size, [staged](const Environment& env) {
    auto comm = world(env);
    const int r = comm->rank();
    std::vector<Buffer> grads;
    if (staged) {
      for (std::size_t i = 0; i < 4; ++i) grads.push_back(f32_filled(4, 0));
    } else {
      const std::size_t counts[] = {4, 4, 4, 4};
      grads = train::contiguous_gradients(counts, DType::Float32);
    }
    GradientSyncOptions options = with_timeout();
    options.first_bucket_cap_bytes = options.bucket_cap_bytes = staged ? 32 : 16;
    GradientSynchronizer sync(comm, grads, options);

    // Rank 1 (rank 0 in a world of one) skips gradient 2; at 3 ranks rank 2 skips gradient 0.
    const int skipper = env.world_size == 1 ? 0 : 1;
    sync.begin_micro_step();
    for (std::size_t i = 0; i < 4; ++i) fill(grads[i], static_cast<float>(r + i));
    for (std::size_t i : {3u, 2u, 1u, 0u}) {
      if (!(r == skipper && i == 2) && !(r == 2 && i == 0)) sync.mark_ready(i);
    }
    if (r == skipper) {
      expect_error([&] { sync.finish(); }, ErrorCode::InvalidUsage,
                   {"gradient 2", "rank " + std::to_string(skipper)}, "skipper's finish");
    } else if (r == 2) {
      expect_error([&] { sync.finish(); }, ErrorCode::InvalidUsage, {"gradient 0", "rank 1"},
                   "rank 2's finish");
    } else {
      expect_error([&] { sync.finish(); }, ErrorCode::InvalidUsage,
                   {env.world_size == 3 ? "ranks 1, 2" : "rank 1"}, "rank 0's finish");
    }
    // In a world of one nothing was reduced: the gradients are as they were. Elsewhere they
    // hold partial results, which the contract leaves unspecified.
    if (env.world_size == 1) {
      for (std::size_t i = 0; i < 4; ++i) expect_all(grads[i], r + i, "untouched after the error");
    }
    for (std::size_t i = 0; i < 4; ++i) fill(grads[i], static_cast<float>(r + i));

    // Every rank is still in step: a complete micro-step averages as usual.
    sync.begin_micro_step();
    for (std::size_t i = 0; i < 4; ++i) sync.mark_ready(i);
    sync.finish();
    for (std::size_t i = 0; i < 4; ++i) {
      expect_all(grads[i], i + (env.world_size - 1) / 2.0, "after recovery");
    }
  }));
}

TEST_CASE("allow_unready: a gradient left unready contributes zeros",
          "[train][gradients][multiproc]") {
  const int size = GENERATE(1, 2, 3);
  CAPTURE(size);
  REQUIRE_NOTHROW(run_ranks(size, [](const Environment& env) {
    auto comm = world(env);
    const int r = comm->rank();
    const int w = env.world_size;
    std::vector<Buffer> grads;
    for (std::size_t i = 0; i < 4; ++i) grads.push_back(f32_filled(4, 0));
    GradientSyncOptions options = with_timeout();
    options.first_bucket_cap_bytes = options.bucket_cap_bytes = 16;
    options.allow_unready = true;
    for (bool cast : {false, true}) {
      if (cast) options.communication_dtype = DType::Float16;
      GradientSynchronizer sync(comm, grads, options);
      // Twice: the second time the staging buffers hold the first step's values, which the
      // unready slot must not send again.
      for (int step = 0; step < 2; ++step) {
        sync.begin_micro_step();
        for (std::size_t i = 0; i < 4; ++i) fill(grads[i], static_cast<float>(r + i));
        const int skipper = w == 1 ? 0 : 1;
        for (std::size_t i = 0; i < 4; ++i) {
          if (!(r == skipper && i == 2)) sync.mark_ready(i);
        }
        sync.finish();
        // Gradient 2: every rank but the skipper sends r + 2, the skipper 0.
        double sum2 = 0;
        for (int q = 0; q < w; ++q) sum2 += q == skipper ? 0 : q + 2;
        for (std::size_t i = 0; i < 4; ++i) {
          const double want = i == 2 ? sum2 / w : i + (w - 1) / 2.0;
          // f16 keeps 11 significant bits: 1/3 of a value below 8 is off by at most 2^-9.
          expect_near(grads[i], want, cast ? 2e-3 : 1e-5,
                      (cast ? "f16 " : "") + std::string("gradient ") + std::to_string(i) +
                          " step " + std::to_string(step));
        }
      }
    }
  }));
}

TEST_CASE("allow_unready with accumulation: what earlier micro-steps added still counts",
          "[train][gradients][multiproc]") {
  // Windows of 2 micro-steps; the engine clears its gradients at a window's start and adds each
  // micro-step's into them. Gradient 0 is used in both micro-steps, gradient 1 only in the
  // first (a conditional layer): at the sync it holds what the first added, which DDP averages
  // as it is (only a gradient never produced counts as zero). Gradient 2 is used in neither and
  // holds 99: zero. In the second window gradient 1 is not cleared and never marked: its stale
  // average must not be sent again. Staged buckets (separate gradients) and views of
  // contiguous_gradients() memory, one gradient per bucket and all in one.
  const int size = GENERATE(1, 2, 3);
  const bool contiguous = GENERATE(false, true);
  const std::size_t cap = GENERATE(std::size_t{16}, std::size_t{1} << 20);
  CAPTURE(size, contiguous, cap);
  REQUIRE_NOTHROW(run_ranks(size, [&](const Environment& env) {
    auto comm = world(env);
    const double r = comm->rank();
    const double w = env.world_size;
    const std::vector<Buffer> grads = zeroed_gradients({4, 4, 4}, contiguous);
    GradientSyncOptions options = with_timeout();
    options.first_bucket_cap_bytes = options.bucket_cap_bytes = cap;
    options.allow_unready = true;
    options.accumulation_steps = 2;
    GradientSynchronizer sync(comm, grads, options);
    const auto add = [](const Buffer& g, double v) {
      for (std::size_t j = 0; j < g.count(); ++j) g.data_as<float>()[j] += static_cast<float>(v);
    };
    for (int window = 0; window < 2; ++window) {
      fill(grads[0], 0);
      if (window == 0) fill(grads[1], 0);
      fill(grads[2], 99);
      RANK_CHECK(!sync.begin_micro_step(), "the first micro-step of a window synced");
      add(grads[0], r + 1);
      sync.mark_ready(0);
      if (window == 0) {
        add(grads[1], 10 * (r + 1));
        sync.mark_ready(1);
      }
      RANK_CHECK(sync.begin_micro_step(), "the second micro-step of a window did not sync");
      add(grads[0], r + 1);
      sync.mark_ready(0);
      sync.finish();
      const std::string when = "window " + std::to_string(window) + ", gradient ";
      // Means over ranks: of 2 (r + 1) is w + 1; of 10 (r + 1) is 5 (w + 1).
      expect_all(grads[0], w + 1, when + "0 (used in both micro-steps)");
      expect_all(grads[1], window == 0 ? 5 * (w + 1) : 0.0,
                 when + (window == 0 ? "1 (used in the first micro-step only)"
                                     : "1 (stale, never marked in this window)"));
      expect_all(grads[2], 0.0, when + "2 (never used)");
    }
  }));
}

TEST_CASE("allow_unready with sync_each_batch: a gradient averaged earlier in the window counts",
          "[train][gradients][multiproc]") {
  // sync_each_batch reduces every micro-step. Rank 0 alone produces gradient 0 (4) in the first
  // micro-step; the others leave it unready (holding 99): every rank then holds 4 / w. Nobody
  // produces it in the second: every rank holds 4 / w and sends it, which averages to 4 / w
  // (4 / w^2 when the ranks that had not marked it sent zeros).
  const int size = GENERATE(2, 3);
  const bool contiguous = GENERATE(false, true);
  CAPTURE(size, contiguous);
  REQUIRE_NOTHROW(run_ranks(size, [&](const Environment& env) {
    auto comm = world(env);
    const double w = env.world_size;
    const std::vector<Buffer> grads = zeroed_gradients({4, 4}, contiguous);
    GradientSyncOptions options = with_timeout();
    options.allow_unready = true;
    options.accumulation_steps = 2;
    options.sync_each_batch = true;
    GradientSynchronizer sync(comm, grads, options);
    fill(grads[0], comm->rank() == 0 ? 4.0f : 99.0f);
    fill(grads[1], 1.0f);
    sync.begin_micro_step();
    if (comm->rank() == 0) sync.mark_ready(0);
    sync.mark_ready(1);
    sync.finish();
    expect_all(grads[0], 4 / w, "gradient 0 after the first micro-step");
    sync.begin_micro_step();
    sync.mark_ready(1);
    sync.finish();
    expect_all(grads[0], 4 / w, "gradient 0 after the second micro-step, unready everywhere");
    expect_all(grads[1], 1.0, "gradient 1");
  }));
}

TEST_CASE("bad arguments and call order fail with clear errors", "[train][gradients][multiproc]") {
  REQUIRE_NOTHROW(run_ranks(1, [](const Environment& env) {
    auto comm = world(env);
    Buffer good = f32_filled(4, 1);
    Buffer ints = Buffer::allocate(4, DType::Int32);
    expect_error(
        [&] {
          GradientSynchronizer s(comm, {good, ints});
        },
        ErrorCode::InvalidArgument, {"gradient 1", "int32"}, "integer gradient");
    Buffer on_gpu = Buffer::view(good.data(), 4, DType::Float32, Device::cuda(0));
    expect_error([&] { GradientSynchronizer s(comm, {on_gpu}); }, ErrorCode::Unsupported,
                 {"gradient 0", "cuda:0"}, "CUDA gradient");
    expect_error(
        [&] {
          GradientSynchronizer s(comm, {good, good.as_read_only()});
        },
        ErrorCode::InvalidArgument, {"gradient 1", "read-only"}, "read-only gradient");
    Buffer strided = Buffer::view(good.data(), {2}, DType::Float32, Device::cpu(), {2});
    expect_error([&] { GradientSynchronizer s(comm, {strided}); }, ErrorCode::InvalidArgument,
                 {"gradient 0", "not contiguous"}, "strided gradient");
    GradientSyncOptions options;
    options.communication_dtype = DType::Float32;
    expect_error([&] { GradientSynchronizer s(comm, {good}, options); }, ErrorCode::InvalidArgument,
                 {"communication dtype float"}, "f32 communication dtype");
    options = {};
    options.accumulation_steps = 0;
    expect_error([&] { GradientSynchronizer s(comm, {good}, options); }, ErrorCode::InvalidArgument,
                 {"accumulation_steps is 0"}, "zero accumulation steps");
    expect_error([&] { GradientSynchronizer s(nullptr, {good}); }, ErrorCode::InvalidArgument,
                 {"communicator is null"}, "null communicator");

    GradientSynchronizer sync(comm, {good, f32_filled(2, 1)});
    expect_error([&] { sync.mark_ready(0); }, ErrorCode::InvalidUsage, {"begin_micro_step"},
                 "mark_ready before the first micro-step");
    sync.begin_micro_step();
    expect_error([&] { sync.mark_ready(2); }, ErrorCode::InvalidArgument,
                 {"gradient index 2", "2 registered"}, "unknown index");
    sync.mark_ready(1);
    expect_error([&] { sync.mark_ready(1); }, ErrorCode::InvalidUsage,
                 {"gradient 1 was already marked"}, "double mark_ready");
    sync.mark_ready(0);
    expect_error([&] { sync.begin_micro_step(); }, ErrorCode::InvalidUsage,
                 {"finish() was not called"}, "begin before finish");
    sync.finish();
    sync.finish();  // again: nothing to do
    expect_error([&] { sync.mark_ready(0); }, ErrorCode::InvalidUsage, {"after finish()"},
                 "mark_ready after finish");
    sync.begin_micro_step();
    sync.mark_ready(0);
    sync.mark_ready(1);
    sync.finish();
  }));
}

TEST_CASE("destroying a synchroniser mid-micro-step waits for its started allreduces",
          "[train][gradients][multiproc]") {
  REQUIRE_NOTHROW(run_ranks(3, [](const Environment& env) {
    auto comm = world(env);
    {
      std::vector<Buffer> grads;
      for (std::size_t i = 0; i < 3; ++i) grads.push_back(f32_filled(1000, 1));
      GradientSyncOptions options = with_timeout();
      options.first_bucket_cap_bytes = options.bucket_cap_bytes = 1;  // one bucket each
      GradientSynchronizer sync(comm, grads, options);
      sync.begin_micro_step();
      for (std::size_t i = 0; i < 3; ++i) sync.mark_ready(i);  // every bucket started
    }
    // The communicator is still in step: the next collective pairs with the same one elsewhere.
    Buffer x = f32_filled(1, static_cast<float>(comm->rank()));
    comm->allreduce(x, ReduceOp::Sum);
    expect_all(x, 3.0, "allreduce after the destroyed synchroniser");
  }));
}

TEST_CASE("a synchroniser without gradients does nothing", "[train][gradients][multiproc]") {
  REQUIRE_NOTHROW(run_ranks(2, [](const Environment& env) {
    GradientSynchronizer sync(world(env), {});
    RANK_CHECK(sync.buckets().empty(), "no buckets");
    RANK_CHECK(sync.begin_micro_step(), "syncs");
    sync.finish();
  }));
}

// ---- broadcast_parameters

namespace {

// Byte k of parameter i on the root. Broadcast copies bytes, so any dtype holds any pattern.
std::uint8_t pattern(std::size_t i, std::size_t k) {
  return static_cast<std::uint8_t>((i * 31 + k * 7 + 1) & 0xFF);
}

// Parameters of mixed dtypes with sizes around chunk_bytes = 64: below, equal, above (two and
// three slices), empty, and small ones that fill a chunk exactly or spill into the next.
std::vector<Buffer> parameters() {
  const std::pair<DType, std::size_t> shapes[] = {
      {DType::Float32, 3},  {DType::Float64, 8},  {DType::Int32, 5},    {DType::UInt8, 0},
      {DType::Float16, 40}, {DType::BFloat16, 7}, {DType::Int8, 63},    {DType::Float64, 1},
      {DType::Float32, 48}, {DType::Int64, 2},    {DType::Float16, 31}, {DType::UInt8, 1}};
  std::vector<Buffer> params;
  for (const auto& [dtype, count] : shapes) params.push_back(Buffer::allocate(count, dtype));
  return params;
}

void check_broadcast_parameters(Communicator& comm, int root, std::size_t chunk_bytes) {
  const std::vector<Buffer> params = parameters();
  for (std::size_t i = 0; i < params.size(); ++i) {
    auto* bytes = params[i].data_as<std::uint8_t>();
    for (std::size_t k = 0; k < params[i].nbytes(); ++k) {
      bytes[k] = comm.rank() == root ? pattern(i, k) : std::uint8_t{0xEE};
    }
  }
  train::broadcast_parameters(comm, params, root, chunk_bytes);
  for (std::size_t i = 0; i < params.size(); ++i) {
    const auto* bytes = params[i].data_as<std::uint8_t>();
    for (std::size_t k = 0; k < params[i].nbytes(); ++k) {
      RANK_CHECK(bytes[k] == pattern(i, k), "root " << root << " chunk " << chunk_bytes
                                                    << ": parameter " << i << " byte " << k
                                                    << " is " << int(bytes[k]));
    }
  }
}

}  // namespace

TEST_CASE("broadcast_parameters: mixed dtypes and sizes around chunk_bytes",
          "[train][gradients][multiproc]") {
  const int size = GENERATE(1, 2, 3, 4, 5);
  CAPTURE(size);
  REQUIRE_NOTHROW(run_ranks(size, [](const Environment& env) {
    auto comm = world(env);
    // Root 1 at 3 ranks (TRAINING.md's shape), and the last rank everywhere.
    for (int root : {std::min(1, comm->size() - 1), comm->size() - 1}) {
      for (std::size_t chunk : {std::size_t{64}, std::size_t{1}, std::size_t{1} << 20}) {
        check_broadcast_parameters(*comm, root, chunk);
      }
    }
    std::vector<Buffer> params = parameters();
    expect_error([&] { train::broadcast_parameters(*comm, params, comm->size()); },
                 ErrorCode::InvalidArgument, {"root " + std::to_string(comm->size())}, "bad root");
    expect_error([&] { train::broadcast_parameters(*comm, params, -1); },
                 ErrorCode::InvalidArgument, {"root -1"}, "negative root");
    expect_error([&] { train::broadcast_parameters(*comm, params, 0, 0); },
                 ErrorCode::InvalidArgument, {"chunk_bytes"}, "zero chunk");
    params[2] = params[2].as_read_only();
    expect_error([&] { train::broadcast_parameters(*comm, params, 0); }, ErrorCode::InvalidArgument,
                 {"parameter 2", "read-only"}, "read-only parameter");
    comm->barrier();
  }));
}

TEST_CASE("a bucket of managed and host gradients in one block is reduced on the host",
          "[train][gradients][multiproc]") {
  // Gradients 0 (managed memory: a view of host memory labelled so, no device runtime needed)
  // and 1 (host memory) follow each other in one block, so their bucket is a view of it. Their
  // place is the host; a view labelled managed would take the core's device path instead.
  const int size = GENERATE(2, 3);
  CAPTURE(size);
  REQUIRE_NOTHROW(run_ranks(size, [](const Environment& env) {
    auto comm = world(env);
    Buffer block = f32_filled(5, static_cast<float>(comm->rank()));
    auto* const data = block.data_as<float>();
    std::vector<Buffer> grads = {
        Buffer::view(data, {2}, DType::Float32, Device{DeviceType::CUDAManaged, 0}, {}, 0,
                     block.owner()),
        Buffer::view(data + 2, {3}, DType::Float32, Device::cpu(), {}, 0, block.owner())};
    GradientSynchronizer sync(comm, grads, with_timeout());
    sync.begin_micro_step();
    sync.mark_ready(1);
    sync.mark_ready(0);
    sync.finish();
    expect_all(block, (env.world_size - 1) / 2.0, "the block's average");
  }));
}

TEST_CASE("broadcast_parameters: a managed parameter on the root goes with the others' host ones",
          "[train][gradients][multiproc]") {
  // Rank 0 loaded its checkpoint into managed memory (a view of host memory labelled so: no
  // device runtime needed); the others hold ordinary memory. A large parameter (a broadcast of
  // its own) must take the host path on every rank: the core sends an op on managed memory down
  // the device path, which no other rank would meet.
  const int size = GENERATE(2, 3);
  CAPTURE(size);
  REQUIRE_NOTHROW(run_ranks(size, [](const Environment& env) {
    CommunicatorOptions options;
    options.timeout = std::chrono::seconds(10);  // a rank left alone fails, not hangs
    auto comm = world(env, options);
    constexpr std::size_t kBytes = 4096;
    Buffer memory = Buffer::allocate(kBytes, DType::UInt8);
    for (std::size_t k = 0; k < kBytes; ++k)
      memory.data_as<std::uint8_t>()[k] = comm->rank() == 0 ? pattern(0, k) : 0;
    Buffer param = memory;
    if (comm->rank() == 0)
      param = Buffer::view(memory.data(), {static_cast<std::int64_t>(kBytes)}, DType::UInt8,
                           Device{DeviceType::CUDAManaged, 0}, {}, 0, memory.owner());
    std::vector<Buffer> params{param};
    train::broadcast_parameters(*comm, params, 0, 1024);
    for (std::size_t k = 0; k < kBytes; ++k)
      RANK_CHECK(memory.data_as<std::uint8_t>()[k] == pattern(0, k), "byte " << k);
  }));
}

TEST_CASE(
    "ranks whose buckets are staged and ranks whose buckets are in place pair the same "
    "gradients",
    "[train][gradients][multiproc]") {
  // Even ranks allocate with contiguous_gradients (every bucket reduced in place), odd ranks
  // allocate each gradient on its own (every bucket of two or more gradients staged). Gradient i
  // holds r + 10 i everywhere, so a bucket that paired gradient 3 of one rank with gradient 2 of
  // another would be off by 10 / world in every element.
  const int size = GENERATE(2, 3);
  CAPTURE(size);
  REQUIRE_NOTHROW(run_ranks(size, [](const Environment& env) {
    auto comm = world(env);
    const int r = comm->rank();
    const std::size_t counts[] = {7, 5, 5, 9, 3, 11};
    std::vector<Buffer> grads;
    if (r % 2 == 0) {
      grads = train::contiguous_gradients(counts, DType::Float32);
    } else {
      for (std::size_t n : counts) grads.push_back(f32_filled(n, 0));
    }
    GradientSyncOptions options = with_timeout();
    options.first_bucket_cap_bytes = 50;  // reverse order, by hand: [5, 4] (56 bytes)
    options.bucket_cap_bytes = 64;        //   then [3, 2, 1] (76 bytes), then [0]
    GradientSynchronizer sync(comm, grads, options);
    RANK_CHECK((sync.buckets() == std::vector<std::vector<std::size_t>>{{5, 4}, {3, 2, 1}, {0}}),
               "bucket layout");
    for (int step = 0; step < 2; ++step) {
      sync.begin_micro_step();
      for (std::size_t i = 0; i < 6; ++i) fill(grads[i], static_cast<float>(r + 10 * i));
      for (std::size_t i : {5u, 4u, 3u, 2u, 1u, 0u}) sync.mark_ready(i);
      sync.finish();
      // Mean over ranks of r + 10 i = 10 i + (world - 1) / 2.
      for (std::size_t i = 0; i < 6; ++i)
        expect_all(grads[i], 10.0 * i + (env.world_size - 1) / 2.0,
                   "gradient " + std::to_string(i));
    }
  }));
}

TEST_CASE("buckets in the layer's own memory are reduced in place in each other's memory",
          "[train][gradients][multiproc]") {
  // contiguous_gradients and the staging buffers are mappable, so an allreduce forced onto the
  // single-copy algorithm takes its mapped path (every rank folds its share of every peer's
  // bucket and writes every peer's output): one such allreduce per bucket and step. The
  // unready-flags allreduce (one float per rank, ordinary memory) copies instead. g_i = r + i
  // averages to i + (world - 1) / 2.
  const int size = GENERATE(2, 3, 5);
  const bool staged = GENERATE(true, false);
  CAPTURE(size, staged);
  const bool peers_readable = cohort::test::siblings_can_read_each_other();
  if (!peers_readable) WARN("ranks may not read each other's memory here: single copy declines");
  REQUIRE_NOTHROW(run_ranks(size, [staged, peers_readable](const Environment& env) {
    ::setenv("COHORT_ALGO", "allreduce:single_copy", 1);
    auto comm = world(env);
    const int r = comm->rank();
    const std::size_t counts[] = {4096, 3001, 5000, 77};
    std::vector<Buffer> grads;
    if (staged) {
      for (std::size_t n : counts) grads.push_back(f32_filled(n, 0));
    } else {
      grads = train::contiguous_gradients(counts, DType::Float32);
      MappableRef ref;
      RANK_CHECK(!memfd_works() || find_mappable(grads[0].data(), grads[0].nbytes(), &ref),
                 "contiguous_gradients' storage is not mappable");
    }
    GradientSyncOptions options = with_timeout();
    options.first_bucket_cap_bytes = options.bucket_cap_bytes = 20000;  // [3, 2], [1, 0]
    GradientSynchronizer sync(comm, grads, options);
    RANK_CHECK((sync.buckets() == std::vector<std::vector<std::size_t>>{{3, 2}, {1, 0}}),
               "bucket layout");
    const std::uint64_t before = algorithms::testing::mapped_allreduces();
    for (int step = 0; step < 2; ++step) {
      sync.begin_micro_step();
      for (std::size_t i = 0; i < 4; ++i) fill(grads[i], static_cast<float>(r + i));
      for (std::size_t i : {3u, 2u, 1u, 0u}) sync.mark_ready(i);
      sync.finish();
      for (std::size_t i = 0; i < 4; ++i)
        expect_all(grads[i], static_cast<double>(i) + (env.world_size - 1) / 2.0,
                   "step " + std::to_string(step) + " gradient " + std::to_string(i));
    }
    // Where ranks may not read each other's memory, single copy declines and nothing is mapped;
    // where the kernel gives no memfd, the layer's memory is ordinary.
    const std::uint64_t mapped = algorithms::testing::mapped_allreduces() - before;
    if (peers_readable && memfd_works())
      RANK_CHECK(mapped == 4, "2 steps of 2 buckets ran "
                                  << mapped << " allreduces on mapped buffers, expected 4");
  }));
}

TEST_CASE("a rank that registers other gradients or rejects its own is named on every rank",
          "[train][gradients][multiproc]") {
  const int size = GENERATE(2, 3);
  CAPTURE(size);
  REQUIRE_NOTHROW(run_ranks(size, [](const Environment& env) {
    auto comm = world(env);
    const int r = comm->rank();
    const int last = env.world_size - 1;
    // Rank `last` registers 4 elements where the others register 5.
    {
      std::vector<Buffer> grads{f32_filled(r == last ? 4 : 5, 0)};
      expect_error([&] { GradientSynchronizer sync(comm, grads, with_timeout()); },
                   ErrorCode::InvalidArgument, {"ranks " + std::to_string(last), "registered"},
                   "differing registration");
    }
    // Rank `last` accumulates over 4 micro-steps where the others take 2: alike in every size
    // and op, its fourth micro-step's allreduce would pair with the others' second.
    {
      std::vector<Buffer> grads{f32_filled(5, 0)};
      GradientSyncOptions options = with_timeout();
      options.accumulation_steps = r == last ? 4 : 2;
      expect_error([&] { GradientSynchronizer sync(comm, grads, options); },
                   ErrorCode::InvalidArgument, {"ranks " + std::to_string(last), "accumulation"},
                   "differing accumulation_steps");
    }
    // Rank `last` registers its middle gradient as pinned host memory (a view of host memory
    // here; no device runtime needed) where the others have ordinary memory: alike in counts
    // and dtypes, but a change of memory kind closes a bucket there (three buckets against one)
    // and the kinds could take different paths.
    {
      std::vector<Buffer> grads{f32_filled(5, 0), f32_filled(5, 0), f32_filled(5, 0)};
      if (r == last)
        grads[1] = Buffer::view(grads[1].data(), {5}, DType::Float32,
                                Device{DeviceType::CUDAHost, 0}, {}, 0, grads[1].owner());
      expect_error([&] { GradientSynchronizer sync(comm, grads, with_timeout()); },
                   ErrorCode::InvalidArgument, {"ranks " + std::to_string(last), "memory"},
                   "differing kinds of memory");
    }
    // All of rank `last`'s pinned, all of the others' pageable: the same path and buckets.
    {
      std::vector<Buffer> grads{f32_filled(5, static_cast<float>(r)),
                                f32_filled(5, static_cast<float>(r))};
      if (r == last)
        for (Buffer& g : grads)
          g = Buffer::view(g.data(), {5}, DType::Float32, Device{DeviceType::CUDAHost, 0}, {}, 0,
                           g.owner());
      GradientSynchronizer sync(comm, grads, with_timeout());
      sync.begin_micro_step();
      sync.mark_ready(0);
      sync.mark_ready(1);
      sync.finish();
      expect_all(grads[0], (env.world_size - 1) / 2.0, "pinned on one rank, pageable elsewhere");
    }
    // Rank `last` passes an int32 gradient: it names its gradient, the others name the rank.
    {
      std::vector<Buffer> grads{f32_filled(5, 0)};
      if (r == last) grads[0] = Buffer::allocate(5, DType::Int32);
      if (r == last) {
        expect_error([&] { GradientSynchronizer sync(comm, grads, with_timeout()); },
                     ErrorCode::InvalidArgument, {"gradient 0"}, "rejected gradient");
      } else {
        expect_error([&] { GradientSynchronizer sync(comm, grads, with_timeout()); },
                     ErrorCode::InvalidArgument, {"ranks " + std::to_string(last), "rejected"},
                     "peer's rejected gradient");
      }
    }
    // Everyone is still in step.
    std::vector<Buffer> grads{f32_filled(5, static_cast<float>(r))};
    GradientSynchronizer sync(comm, grads, with_timeout());
    sync.begin_micro_step();
    sync.mark_ready(0);
    sync.finish();
    expect_all(grads[0], (env.world_size - 1) / 2.0, "after the errors");
  }));
}

TEST_CASE("broadcast_parameters: a rank with other sizes or a bad root is an error on every rank",
          "[train][gradients][multiproc]") {
  const int size = GENERATE(2, 3);
  CAPTURE(size);
  REQUIRE_NOTHROW(run_ranks(size, [](const Environment& env) {
    auto comm = world(env);
    const int r = comm->rank();
    const int last = env.world_size - 1;
    // The last rank's second parameter has 3 elements where the others have 4.
    {
      std::vector<Buffer> params{f32_filled(2, 0), f32_filled(r == last ? 3 : 4, 0)};
      expect_error([&] { train::broadcast_parameters(*comm, params, 0); },
                   ErrorCode::InvalidArgument, {"ranks " + std::to_string(last), "differently"},
                   "differing sizes");
    }
    // The last rank names a root outside the communicator.
    {
      std::vector<Buffer> params{f32_filled(2, 0)};
      if (r == last) {
        expect_error([&] { train::broadcast_parameters(*comm, params, 7); },
                     ErrorCode::InvalidArgument, {"root 7"}, "its own bad root");
      } else {
        expect_error([&] { train::broadcast_parameters(*comm, params, 0); },
                     ErrorCode::InvalidArgument, {"ranks " + std::to_string(last), "rejected"},
                     "a peer's bad root");
      }
    }
    // Still in step: a good broadcast from the last rank arrives everywhere.
    std::vector<Buffer> params{f32_filled(3, static_cast<float>(r))};
    train::broadcast_parameters(*comm, params, last);
    expect_all(params[0], last, "after the errors");
  }));
}
