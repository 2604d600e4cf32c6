// The correctness check: data fits every dtype exactly, a correct result (computed here by a
// plain loop over simulated ranks, independent of expected_value) counts zero wrong, and each
// kind of fault is counted.

#include "check_data.hpp"
#include "element_access.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <vector>

using namespace cohort;
using namespace cohort::bench;

namespace {

// A host array of `count` elements of `dtype`.
struct Array {
  Array(DType dtype, std::size_t count) : dtype(dtype), bytes(count * dtype_size(dtype)) {}
  void* data() { return bytes.data(); }
  double get(std::size_t i) const { return load_element(dtype, bytes.data(), i); }
  void set(std::size_t i, double v) { store_element(dtype, bytes.data(), i, v); }
  DType dtype;
  std::vector<unsigned char> bytes;
};

// Every rank's input for `c`, as the ranks would fill them.
std::vector<Array> rank_inputs(CheckCase c, std::size_t count) {
  std::vector<Array> inputs;
  for (int r = 0; r < c.world_size; ++r) {
    c.rank = r;
    inputs.emplace_back(c.dtype, count);
    fill_input(c, inputs.back().data(), count);
  }
  return inputs;
}

// What an allreduce over `inputs` produces, by a loop in the dtype's own arithmetic range.
Array simulated_allreduce(const CheckCase& c, const std::vector<Array>& inputs, std::size_t n) {
  Array out(c.dtype, n);
  for (std::size_t i = 0; i < n; ++i) {
    double acc = inputs[0].get(i);
    for (std::size_t r = 1; r < inputs.size(); ++r) {
      const double v = inputs[r].get(i);
      switch (c.redop) {
        case ReduceOp::Sum:
        case ReduceOp::Avg: acc += v; break;
        case ReduceOp::Prod: acc *= v; break;
        case ReduceOp::Min: acc = v < acc ? v : acc; break;
        case ReduceOp::Max: acc = v > acc ? v : acc; break;
        default: break;
      }
    }
    if (c.redop == ReduceOp::Avg) {
      // Floats divide in the accumulate type cohort documents (float, double for f64).
      const auto n_ranks = static_cast<double>(inputs.size());
      if (c.dtype == DType::Float64) {
        acc /= n_ranks;
      } else if (dtype_is_floating(c.dtype)) {
        acc = static_cast<float>(acc) / static_cast<float>(n_ranks);
      } else {
        acc = std::trunc(acc / n_ranks);
      }
    }
    out.set(i, acc);
  }
  return out;
}

constexpr DType kSweptTypes[] = {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16,
                                 DType::Int8,    DType::UInt8,   DType::Int32,   DType::UInt32,
                                 DType::Int64,   DType::UInt64};
constexpr ReduceOp kSweptOps[] = {ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Min, ReduceOp::Max,
                                  ReduceOp::Avg};

}  // namespace

TEST_CASE("half and bfloat16 conversions match known encodings", "[bench][check]") {
  CHECK(float_to_half(1.0f) == 0x3c00);
  CHECK(float_to_half(-2.0f) == 0xc000);
  CHECK(float_to_half(65504.0f) == 0x7bff);
  CHECK(float_to_half(65520.0f) == 0x7c00);  // rounds up to infinity
  CHECK(float_to_half(0x1p-24f) == 0x0001);  // smallest subnormal
  CHECK(float_to_half(0.1f) == 0x2e66);
  CHECK(float_to_half(2049.0f) == 0x6800);  // tie: rounds to even (2048)
  CHECK(float_to_half(2051.0f) == 0x6802);  // tie: rounds to even (2052)
  CHECK(half_to_float(0x3555) == Approx(0.333251953125));
  CHECK(half_to_float(0x0001) == 0x1p-24f);
  CHECK(half_to_float(0x7c00) == INFINITY);
  CHECK(std::isnan(half_to_float(0x7e00)));
  CHECK(float_to_bfloat16(1.0f) == 0x3f80);
  CHECK(float_to_bfloat16(257.0f) == 0x4380);  // tie: 256
  CHECK(float_to_bfloat16(259.0f) == 0x4382);  // tie: 260
  CHECK(bfloat16_to_float(0xc0a0) == -5.0f);
  CHECK(std::isnan(bfloat16_to_float(float_to_bfloat16(NAN))));
  for (int v = -2048; v <= 2048; ++v) {
    CHECK(half_to_float(float_to_half(static_cast<float>(v))) == static_cast<float>(v));
  }
}

TEST_CASE("a correct allreduce has no wrong elements for every dtype, op and world size",
          "[bench][check]") {
  constexpr std::size_t n = 97;
  // 200 and 300 ranks: more than int8, uint8 and bfloat16 count exactly.
  for (int ws : {1, 2, 3, 5, 8, 16, 200, 300}) {
    for (DType dtype : kSweptTypes) {
      for (ReduceOp redop : kSweptOps) {
        INFO("ws " << ws << " dtype " << dtype_name(dtype) << " op " << reduce_op_name(redop));
        CheckCase c{BenchOp::Allreduce, dtype, redop, 0, ws, ws - 1};
        const auto inputs = rank_inputs(c, n);
        Array out = simulated_allreduce(c, inputs, n);
        const OpShape shape =
            op_shape(BenchOp::Allreduce, n * dtype_size(dtype), dtype_size(dtype), ws, c.rank);
        CHECK(count_wrong(c, shape, out.data()) == 0);
        // The data is exact: no result leaves the dtype's exactly-representable range.
        for (std::size_t i = 0; i < n; ++i) {
          REQUIRE(std::abs(out.get(i)) <= exact_integer_limit(dtype));
        }
        // Off by one in a single element is caught.
        out.set(n / 2, out.get(n / 2) + 1);
        CHECK(count_wrong(c, shape, out.data()) == 1);
      }
    }
  }
}

TEST_CASE("inputs differ between ranks and elements", "[bench][check]") {
  CheckCase c{BenchOp::Allgather, DType::UInt8, ReduceOp::Sum, 0, 4, 0};
  CHECK(input_value(c, 0, 0) != input_value(c, 1, 0));
  CHECK(input_value(c, 0, 0) != input_value(c, 0, 1));
  c.op = BenchOp::Allreduce;
  c.redop = ReduceOp::Max;
  CHECK(input_value(c, 0, 5) != input_value(c, 1, 5));
}

TEST_CASE("data-movement ops: the right layout passes, misplaced blocks fail", "[bench][check]") {
  constexpr int ws = 3;
  constexpr std::size_t per = 5;
  const DType dtype = DType::Int32;
  SECTION("allgather") {
    CheckCase c{BenchOp::Allgather, dtype, ReduceOp::Sum, 0, ws, 1};
    const auto inputs = rank_inputs(c, per);
    const OpShape shape = op_shape(c.op, per * ws * 4, 4, ws, c.rank);
    Array out(dtype, per * ws);
    for (int s = 0; s < ws; ++s)
      for (std::size_t i = 0; i < per; ++i) out.set(s * per + i, inputs[s].get(i));
    CHECK(count_wrong(c, shape, out.data()) == 0);
    // Swap the blocks of ranks 0 and 2.
    for (std::size_t i = 0; i < per; ++i) {
      out.set(i, inputs[2].get(i));
      out.set(2 * per + i, inputs[0].get(i));
    }
    CHECK(count_wrong(c, shape, out.data()) == 2 * per);
  }
  SECTION("alltoall") {
    CheckCase c{BenchOp::Alltoall, dtype, ReduceOp::Sum, 0, ws, 2};
    const auto inputs = rank_inputs(c, per * ws);
    const OpShape shape = op_shape(c.op, per * ws * 4, 4, ws, c.rank);
    Array out(dtype, per * ws);
    // Block s of rank 2's output is block 2 of rank s's input.
    for (int s = 0; s < ws; ++s)
      for (std::size_t i = 0; i < per; ++i) out.set(s * per + i, inputs[s].get(2 * per + i));
    CHECK(count_wrong(c, shape, out.data()) == 0);
    fill_sentinel(dtype, out.data(), per);  // block 0 never arrived
    CHECK(count_wrong(c, shape, out.data()) == per);
  }
  SECTION("broadcast, scatter and sendrecv") {
    CheckCase c{BenchOp::Broadcast, dtype, ReduceOp::Sum, 2, ws, 0};
    const auto inputs = rank_inputs(c, per * ws);
    Array out(dtype, per);
    for (std::size_t i = 0; i < per; ++i) out.set(i, inputs[2].get(i));
    CHECK(count_wrong(c, op_shape(c.op, per * 4, 4, ws, 0), out.data()) == 0);
    c.root = 1;  // expecting another root's data
    CHECK(count_wrong(c, op_shape(c.op, per * 4, 4, ws, 0), out.data()) == per);

    c = {BenchOp::Scatter, dtype, ReduceOp::Sum, 2, ws, 1};
    for (std::size_t i = 0; i < per; ++i) out.set(i, inputs[2].get(per + i));
    CHECK(count_wrong(c, op_shape(c.op, per * ws * 4, 4, ws, 1), out.data()) == 0);

    c = {BenchOp::Send, dtype, ReduceOp::Sum, 0, ws, 0};
    for (std::size_t i = 0; i < per; ++i) out.set(i, inputs[ws - 1].get(i));  // from rank 2
    CHECK(count_wrong(c, op_shape(c.op, per * 4, 4, ws, 0), out.data()) == 0);
  }
  SECTION("reduce and gather check the root only") {
    CheckCase c{BenchOp::Reduce, dtype, ReduceOp::Sum, 1, ws, 0};
    CHECK_FALSE(rank_has_output(c));
    Array junk(dtype, per);
    fill_sentinel(dtype, junk.data(), per);
    CHECK(count_wrong(c, op_shape(c.op, per * 4, 4, ws, 0), junk.data()) == 0);
    c.rank = 1;
    CHECK(rank_has_output(c));
    CHECK(count_wrong(c, op_shape(c.op, per * 4, 4, ws, 1), junk.data()) == per);
  }
}

TEST_CASE("reduce_scatter expects this rank's slice of the reduction", "[bench][check]") {
  constexpr int ws = 4;
  constexpr std::size_t per = 3;
  CheckCase c{BenchOp::ReduceScatter, DType::Float32, ReduceOp::Sum, 0, ws, 3};
  const auto inputs = rank_inputs(c, per * ws);
  const Array full = simulated_allreduce(c, inputs, per * ws);
  Array out(DType::Float32, per);
  for (std::size_t i = 0; i < per; ++i) out.set(i, full.get(3 * per + i));
  const OpShape shape = op_shape(c.op, per * ws * 4, 4, ws, 3);
  CHECK(count_wrong(c, shape, out.data()) == 0);
  for (std::size_t i = 0; i < per; ++i) out.set(i, full.get(i));  // rank 0's slice instead
  CHECK(count_wrong(c, shape, out.data()) > 0);
}

TEST_CASE("sentinels and NaN are wrong; corrupt_output makes exactly one wrong", "[bench][check]") {
  for (DType dtype : kSweptTypes) {
    INFO("dtype " << dtype_name(dtype));
    CheckCase c{BenchOp::Allreduce, dtype, ReduceOp::Sum, 0, 3, 1};
    const std::size_t n = 16;
    const OpShape shape = op_shape(c.op, n * dtype_size(dtype), dtype_size(dtype), 3, 1);
    Array out(dtype, n);
    fill_sentinel(dtype, out.data(), n);
    CHECK(count_wrong(c, shape, out.data()) == n);
    const auto inputs = rank_inputs(c, n);
    out = simulated_allreduce(c, inputs, n);
    CHECK(count_wrong(c, shape, out.data()) == 0);
    corrupt_output(c, shape, out.data());
    CHECK(count_wrong(c, shape, out.data()) == 1);
  }
  CheckCase c{BenchOp::Allreduce, DType::Float32, ReduceOp::Avg, 0, 3, 0};
  Array out(DType::Float32, 1);
  out.set(0, NAN);
  CHECK(count_wrong(c, op_shape(c.op, 4, 4, 3, 0), out.data()) == 1);
}
