// clip_grad_norm / clip_grad_value on real processes: TRAINING.md's hand-computed cases (sharded
// 2-norm, infinity norm, p = 1, infinite and NaN totals, error_if_nonfinite agreed by every rank),
// a general p, mixed dtypes, world sizes 1-5 against a scalar reference, and bad arguments.

#include <cohort/error.hpp>
#include <cohort/train/gradients.hpp>

#include <catch2/catch.hpp>

#include "comm/rank_checks.hpp"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

namespace {

using namespace cohort;
using namespace cohort::test;
using train::clip_grad_norm;
using train::clip_grad_value;
using train::ClipOptions;
using train::kInfinityNorm;

constexpr double kInf = std::numeric_limits<double>::infinity();

Buffer f32(std::vector<float> values) {
  Buffer b = Buffer::allocate(values.size(), DType::Float32);
  std::copy(values.begin(), values.end(), b.data_as<float>());
  return b;
}

// Within 1e-5 relative; NaN and infinities must match exactly.
bool close(double got, double want, double relative) {
  if (std::isnan(want)) return std::isnan(got);
  if (std::isinf(want)) return got == want;
  return std::fabs(got - want) <= relative * (1 + std::fabs(want));
}

void expect_f32(const Buffer& b, std::vector<double> want, const std::string& what) {
  for (std::size_t j = 0; j < want.size(); ++j) {
    const double got = b.data_as<float>()[j];
    RANK_CHECK(close(got, want[j], 1e-5),
               what << ": element " << j << " is " << got << ", expected " << want[j]);
  }
}

void expect_total(double got, double want, const std::string& what) {
  RANK_CHECK(close(got, want, 1e-9), what << ": total " << got << ", expected " << want);
}

ClipOptions sharded(std::shared_ptr<Communicator> group, double p = 2.0) {
  ClipOptions options;
  options.norm_type = p;
  options.shard_group = std::move(group);
  options.timeout = std::chrono::milliseconds(20000);
  return options;
}

}  // namespace

TEST_CASE("TRAINING.md's sharded cases on 2 ranks", "[train][clipping][multiproc]") {
  REQUIRE_NOTHROW(run_ranks(2, [](const Environment& env) {
    auto comm = world(env);
    const bool r0 = comm->rank() == 0;
    {
      // 2-norm of [3] and [4] is 5; max 1 -> coef 1 / (5 + 1e-6): 0.6 and 0.8.
      std::vector<Buffer> grads = {r0 ? f32({3}) : f32({4})};
      expect_total(clip_grad_norm(grads, 1.0, sharded(comm)), 5.0, "2-norm");
      expect_f32(grads[0], {r0 ? 0.6 : 0.8}, "2-norm clipped");
    }
    {
      // Infinity norm of [-7, 2] and [5] is 7; max 14 -> coef ~2, clamped to 1: unchanged.
      std::vector<Buffer> grads = {r0 ? f32({-7, 2}) : f32({5})};
      expect_total(clip_grad_norm(grads, 14.0, sharded(comm, kInfinityNorm)), 7.0, "inf-norm");
      expect_f32(grads[0], r0 ? std::vector<double>{-7, 2} : std::vector<double>{5},
                 "inf-norm unchanged");
    }
    {
      // 1-norm of [1, -2] and [3] is 6; max 3 -> coef ~0.5: [0.5, -1] and [1.5].
      std::vector<Buffer> grads = {r0 ? f32({1, -2}) : f32({3})};
      expect_total(clip_grad_norm(grads, 3.0, sharded(comm, 1.0)), 6.0, "1-norm");
      expect_f32(grads[0], r0 ? std::vector<double>{0.5, -1} : std::vector<double>{1.5},
                 "1-norm clipped");
    }
    {
      // A rank without gradients still takes part: both see 5 and rank 1's [3, 4] is clipped.
      std::vector<Buffer> grads;
      if (!r0) grads.push_back(f32({3, 4}));
      expect_total(clip_grad_norm(grads, 1.0, sharded(comm)), 5.0, "one rank without gradients");
      if (!r0) expect_f32(grads[0], {0.6, 0.8}, "clipped on the rank that has them");
    }
    {
      // error_if_nonfinite: only rank 1 holds a NaN, both ranks throw, nothing is touched.
      std::vector<Buffer> grads = {r0 ? f32({3}) : f32({std::nanf(""), 4})};
      ClipOptions options = sharded(comm);
      options.error_if_nonfinite = true;
      expect_error([&] { clip_grad_norm(grads, 1.0, options); }, ErrorCode::InvalidArgument,
                   {"nan", "error_if_nonfinite"}, "non-finite total");
      expect_f32(grads[0], r0 ? std::vector<double>{3} : std::vector<double>{std::nan(""), 4},
                 "untouched after the error");
      // Without the option the NaN total makes every gradient NaN, on both ranks.
      options.error_if_nonfinite = false;
      expect_total(clip_grad_norm(grads, 1.0, options), std::nan(""), "NaN total");
      expect_f32(
          grads[0],
          r0 ? std::vector<double>{std::nan("")} : std::vector<double>{std::nan(""), std::nan("")},
          "NaN total spreads");
    }
    {
      // The infinity norm keeps a NaN through the Max allreduce too.
      std::vector<Buffer> grads = {r0 ? f32({1}) : f32({std::nanf("")})};
      ClipOptions options = sharded(comm, kInfinityNorm);
      options.error_if_nonfinite = true;
      expect_error([&] { clip_grad_norm(grads, 1.0, options); }, ErrorCode::InvalidArgument,
                   {"nan"}, "NaN infinity norm");
    }
  }));
}

TEST_CASE("local totals: [1, inf] -> inf and [0, NaN]; no gradients -> 0; general p; dtypes",
          "[train][clipping][multiproc]") {
  REQUIRE_NOTHROW(run_ranks(1, [](const Environment&) {
    {
      // coef = 1 / inf = 0: the finite gradient becomes 0, the infinite one inf x 0 = NaN.
      std::vector<Buffer> grads = {f32({1, std::numeric_limits<float>::infinity()})};
      expect_total(clip_grad_norm(grads, 1.0), kInf, "infinite total");
      expect_f32(grads[0], {0, std::nan("")}, "infinite total clipped");
    }
    {
      std::vector<Buffer> grads = {f32({1, std::numeric_limits<float>::infinity()})};
      ClipOptions options;
      options.error_if_nonfinite = true;
      expect_error([&] { clip_grad_norm(grads, 1.0, options); }, ErrorCode::InvalidArgument,
                   {"inf"}, "infinite total with error_if_nonfinite");
      expect_f32(grads[0], {1, kInf}, "untouched");
    }
    expect_total(clip_grad_norm({}, 1.0), 0.0, "no gradients");
    {
      std::vector<Buffer> grads = {f32({}), f32({})};
      expect_total(clip_grad_norm(grads, 0.5), 0.0, "empty gradients");
    }
    {
      // p = 3 over two buffers: 1 + 8 + 8 = 17, total 17^(1/3); max 1 scales by 1 / total.
      std::vector<Buffer> grads = {f32({1, -2}), f32({2})};
      ClipOptions options;
      options.norm_type = 3.0;
      const double total = std::cbrt(17.0);
      expect_total(clip_grad_norm(grads, 1.0, options), total, "p = 3");
      const double coef = 1.0 / (total + 1e-6);
      expect_f32(grads[0], {coef, -2 * coef}, "p = 3 first");
      expect_f32(grads[1], {2 * coef}, "p = 3 second");
    }
    {
      // f16 [3] and f64 [4]: total 5, coef 1 / (5 + 1e-6). f16: 3 x coef = 0.59999988 rounds to
      // 1229 x 2^-11 = 0.60009765625 (bits 0x38CD); f64 gets 4 x coef in f64, as torch
      // multiplies an f64 gradient by an f64 coefficient.
      Buffer half = Buffer::allocate(1, DType::Float16);
      *half.data_as<std::uint16_t>() = 0x4200;  // 3.0
      Buffer wide = Buffer::allocate(1, DType::Float64);
      *wide.data_as<double>() = 4.0;
      std::vector<Buffer> grads = {half, wide};
      expect_total(clip_grad_norm(grads, 1.0), 5.0, "mixed dtypes");
      RANK_CHECK(*half.data_as<std::uint16_t>() == 0x38CD,
                 "f16 clipped bits " << std::hex << *half.data_as<std::uint16_t>());
      RANK_CHECK(*wide.data_as<double>() == 4.0 * (1.0 / (5.0 + 1e-6)),
                 "f64 clipped to " << *wide.data_as<double>());
    }
    {
      // f64 host gradients need no alignment: [3, 4] four bytes into an allocation, total 5.
      Buffer storage = Buffer::allocate(2 * sizeof(double) + 8, DType::UInt8);
      auto* const at = storage.data_as<std::byte>() + 4;
      const double values[2] = {3.0, 4.0};
      std::memcpy(at, values, sizeof(values));
      std::vector<Buffer> grads = {Buffer::view(static_cast<void*>(at), 2, DType::Float64)};
      expect_total(clip_grad_norm(grads, 1.0), 5.0, "unaligned f64");
      double clipped[2];
      std::memcpy(clipped, at, sizeof(clipped));
      const double coef = 1.0 / (5.0 + 1e-6);
      RANK_CHECK(clipped[0] == 3.0 * coef && clipped[1] == 4.0 * coef,
                 "unaligned f64 clipped to " << clipped[0] << ", " << clipped[1]);
    }
    {
      // Below max_norm nothing changes (coef clamped to 1): sqrt(0.140625 + 0.25) = 0.625.
      // max_norm 0 zeroes.
      std::vector<Buffer> grads = {f32({0.375f, -0.5f})};
      expect_total(clip_grad_norm(grads, 1.0), 0.625, "below max");
      expect_f32(grads[0], {0.375, -0.5}, "below max unchanged");
      clip_grad_norm(grads, 0.0);
      expect_f32(grads[0], {0, 0}, "max_norm 0");
    }
  }));
}

TEST_CASE("every rank of a shard group sees the same total (1-5 ranks)",
          "[train][clipping][multiproc]") {
  const int size = GENERATE(1, 2, 3, 4, 5);
  CAPTURE(size);
  REQUIRE_NOTHROW(run_ranks(size, [](const Environment& env) {
    auto comm = world(env);
    const int r = comm->rank();
    // Rank r holds [r + 1, -(r + 1)]: the reference sums over ranks with a plain loop.
    for (double p : {1.0, 2.0, 2.5, kInfinityNorm}) {
      double sum = 0, largest = 0;
      for (int q = 0; q < env.world_size; ++q) {
        sum += 2 * std::pow(q + 1.0, std::isinf(p) ? 1.0 : p);
        largest = std::max(largest, q + 1.0);
      }
      const double total = std::isinf(p) ? largest : std::pow(sum, 1.0 / p);
      std::vector<Buffer> grads = {f32({r + 1.0f, -(r + 1.0f)})};
      expect_total(clip_grad_norm(grads, 1.0, sharded(comm, p)), total, "p " + std::to_string(p));
      const double coef = std::min(1.0, 1.0 / (total + 1e-6));
      expect_f32(grads[0], {(r + 1) * coef, -(r + 1) * coef}, "p " + std::to_string(p));
    }
  }));
}

TEST_CASE("clip_grad_value clamps to [-v, v] and keeps NaN", "[train][clipping][multiproc]") {
  REQUIRE_NOTHROW(run_ranks(1, [](const Environment&) {
    std::vector<Buffer> grads = {f32({-3, 0.5f, 2, std::nanf("")}), f32({-0.25f}), f32({})};
    clip_grad_value(grads, 1.0);
    expect_f32(grads[0], {-1, 0.5, 1, std::nan("")}, "clamped");
    expect_f32(grads[1], {-0.25}, "inside");
    clip_grad_value(grads, 0.0);
    expect_f32(grads[0], {0, 0, 0, std::nan("")}, "value 0");
    expect_error([&] { clip_grad_value(grads, -1.0); }, ErrorCode::InvalidArgument, {"-1"},
                 "negative value");
    expect_error([&] { clip_grad_value(grads, std::nan("")); }, ErrorCode::InvalidArgument, {"nan"},
                 "NaN value");
  }));
}

TEST_CASE("clipping rejects bad arguments", "[train][clipping][multiproc]") {
  REQUIRE_NOTHROW(run_ranks(1, [](const Environment&) {
    std::vector<Buffer> grads = {f32({1, 2})};
    for (double p : {0.0, -1.0, std::nan("")}) {
      ClipOptions options;
      options.norm_type = p;
      expect_error([&] { clip_grad_norm(grads, 1.0, options); }, ErrorCode::InvalidArgument,
                   {"norm_type"}, "bad norm_type");
    }
    expect_error([&] { clip_grad_norm(grads, -1.0); }, ErrorCode::InvalidArgument, {"max_norm -1"},
                 "negative max_norm");
    std::vector<Buffer> mixed = {f32({1}), Buffer::allocate(2, DType::Int64)};
    expect_error([&] { clip_grad_norm(mixed, 1.0); }, ErrorCode::InvalidArgument,
                 {"gradient 1", "int64"}, "integer gradient");
    expect_error([&] { clip_grad_value(mixed, 1.0); }, ErrorCode::InvalidArgument,
                 {"gradient 1", "int64"}, "integer gradient (value)");
    std::vector<Buffer> on_gpu = {
        Buffer::view(grads[0].data(), 2, DType::Float32, Device::cuda(1))};
    expect_error([&] { clip_grad_norm(on_gpu, 1.0); }, ErrorCode::Unsupported,
                 {"gradient 0", "cuda:1"}, "CUDA gradient");
    std::vector<Buffer> read_only = {grads[0].as_read_only()};
    expect_error([&] { clip_grad_value(read_only, 1.0); }, ErrorCode::InvalidArgument,
                 {"read-only"}, "read-only gradient");
    expect_f32(grads[0], {1, 2}, "untouched by the rejected calls");
  }));
}

TEST_CASE("a shard-group rank with bad arguments makes every rank throw, none modified",
          "[train][clipping][multiproc]") {
  const int size = GENERATE(2, 3);
  const bool infinity = GENERATE(false, true);
  CAPTURE(size, infinity);
  REQUIRE_NOTHROW(run_ranks(size, [infinity](const Environment& env) {
    auto comm = world(env);
    const int r = comm->rank();
    std::vector<Buffer> grads = {f32({30, 40})};
    ClipOptions options = sharded(comm, infinity ? kInfinityNorm : 2.0);
    if (r == env.world_size - 1) {
      grads.push_back(Buffer::allocate(2, DType::Int64));
      expect_error([&] { clip_grad_norm(grads, 1.0, options); }, ErrorCode::InvalidArgument,
                   {"gradient 1", "int64"}, "the rejecting rank");
    } else {
      expect_error([&] { clip_grad_norm(grads, 1.0, options); }, ErrorCode::InvalidArgument,
                   {"shard group rejected"}, "its peers");
    }
    expect_f32(grads[0], {30, 40}, "not modified");
    // Still in step: the same call with good arguments agrees on 50 * sqrt(world) (2-norm) or 40.
    std::vector<Buffer> good = {f32({30, 40})};
    const double total = clip_grad_norm(good, 1e9, options);
    expect_total(total, infinity ? 40.0 : 50.0 * std::sqrt(env.world_size), "after the error");
  }));
}

TEST_CASE("shard-group ranks that pass other clipping arguments all throw, none modified",
          "[train][clipping][multiproc]") {
  const int size = GENERATE(2, 3);
  // 0: the last rank takes the infinity norm (a Max where the others Sum), 1: another max_norm,
  // 2: another error_if_nonfinite.
  const int variant = GENERATE(0, 1, 2);
  CAPTURE(size, variant);
  REQUIRE_NOTHROW(run_ranks(size, [variant](const Environment& env) {
    auto comm = world(env);
    const bool odd_one = comm->rank() == env.world_size - 1;
    std::vector<Buffer> grads = {f32({30, 40})};
    ClipOptions options = sharded(comm);
    double max_norm = 1.0;
    if (odd_one && variant == 0) options.norm_type = kInfinityNorm;
    if (odd_one && variant == 1) max_norm = 2.0;
    if (odd_one && variant == 2) options.error_if_nonfinite = true;
    expect_error([&] { clip_grad_norm(grads, max_norm, options); }, ErrorCode::InvalidArgument,
                 {"rank(s) " + std::to_string(env.world_size - 1), "another norm_type, max_norm"},
                 "differing arguments");
    expect_f32(grads[0], {30, 40}, "not modified");
    // Still in step: agreed arguments give 50 * sqrt(world).
    std::vector<Buffer> good = {f32({30, 40})};
    expect_total(clip_grad_norm(good, 1e9, sharded(comm)), 50.0 * std::sqrt(env.world_size),
                 "after the error");
  }));
}
