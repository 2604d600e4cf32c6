#include "check_data.hpp"

#include "element_access.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace cohort::bench {
namespace {

// Non-reducing ops use values below this (or the dtype's exact limit): distinct enough that a
// misplaced block or a wrong source rank shows up.
constexpr double kMovedValueModulus = 1021;
// Reducing ops use values in [1, kMaxReducedValue], fewer when many ranks must sum in range.
constexpr double kMaxReducedValue = 16;

double fold(ReduceOp op, double acc, double value) {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg: return acc + value;
    case ReduceOp::Prod: return acc * value;
    case ReduceOp::Min: return std::min(acc, value);
    case ReduceOp::Max: return std::max(acc, value);
    default: return acc;  // bitwise ops are not swept (the CLI offers sum|prod|min|max|avg)
  }
}

// The reduction over all ranks of input element `index`.
double reduced_value(const CheckCase& c, std::size_t index) {
  double acc = input_value(c, 0, index);
  for (int r = 1; r < c.world_size; ++r) acc = fold(c.redop, acc, input_value(c, r, index));
  if (c.redop == ReduceOp::Avg) {
    acc /= c.world_size;
    if (!dtype_is_floating(c.dtype)) acc = std::trunc(acc);
  }
  return acc;
}

}  // namespace

double input_value(const CheckCase& c, int source_rank, std::size_t index) {
  const auto r = static_cast<std::size_t>(source_rank);
  const double limit = exact_integer_limit(c.dtype);
  if (!op_reduces(c.op)) {
    const auto modulus = static_cast<std::size_t>(std::min(limit, kMovedValueModulus));
    return static_cast<double>((r * 131 + index * 7 + 1) % modulus);
  }
  if (c.redop == ReduceOp::Prod) {
    // One rank contributes 2, the next 3, the rest 1: the product is 6 (2 on one rank).
    const auto ws = static_cast<std::size_t>(c.world_size);
    const std::size_t turn = (index + r) % ws;
    return turn == 0 ? 2.0 : (turn == 1 ? 3.0 : 1.0);
  }
  const double per_rank = std::floor(limit / c.world_size);
  if (per_rank < 1.0) {
    // More ranks than the dtype counts exactly (int8 past 127): ones from half as many ranks
    // as it counts to, in turn, and zeros from the rest, so the sum is exact and so is a sum
    // off by one.
    const auto ws = static_cast<std::size_t>(c.world_size);
    return (index + r) % ws < static_cast<std::size_t>(limit / 2) ? 1.0 : 0.0;
  }
  const auto modulus = static_cast<std::size_t>(std::clamp(per_rank, 1.0, kMaxReducedValue));
  return 1.0 + static_cast<double>((index * 3 + r) % modulus);
}

bool rank_has_output(const CheckCase& c) noexcept {
  switch (c.op) {
    case BenchOp::Reduce:
    case BenchOp::Gather: return c.rank == c.root;
    case BenchOp::Barrier: return false;
    default: return true;
  }
}

double expected_value(const CheckCase& c, const OpShape& shape, std::size_t out_index) {
  const int ws = c.world_size;
  const auto rank = static_cast<std::size_t>(c.rank);
  switch (c.op) {
    case BenchOp::Allreduce:
    case BenchOp::Reduce: return reduced_value(c, out_index);
    case BenchOp::Broadcast: return input_value(c, c.root, out_index);
    case BenchOp::Send: return input_value(c, (c.rank - 1 + ws) % ws, out_index);
    case BenchOp::Allgather:
    case BenchOp::Gather: {
      // Block s of the output is rank s's whole input.
      const std::size_t per_rank = shape.in_count;
      return input_value(c, static_cast<int>(out_index / per_rank), out_index % per_rank);
    }
    case BenchOp::ReduceScatter: return reduced_value(c, rank * shape.out_count + out_index);
    case BenchOp::Scatter: return input_value(c, c.root, rank * shape.out_count + out_index);
    case BenchOp::Alltoall: {
      // Block s of the output is block `rank` of rank s's input.
      const std::size_t per_rank = shape.out_count / static_cast<std::size_t>(ws);
      const auto source = static_cast<int>(out_index / per_rank);
      return input_value(c, source, rank * per_rank + out_index % per_rank);
    }
    case BenchOp::Barrier:
    default:  // not bench ops
      break;
  }
  return 0.0;
}

void fill_input(const CheckCase& c, void* in, std::size_t count) {
  for (std::size_t j = 0; j < count; ++j) store_element(c.dtype, in, j, input_value(c, c.rank, j));
}

void fill_sentinel(DType dtype, void* out, std::size_t count) {
  if (count > 0) std::memset(out, 0xff, count * dtype_size(dtype));
}

std::size_t count_wrong(const CheckCase& c, const OpShape& shape, const void* out) {
  if (!rank_has_output(c)) return 0;
  const bool rounds = c.redop == ReduceOp::Avg && op_reduces(c.op) && dtype_is_floating(c.dtype);
  const double eps = dtype_epsilon(c.dtype);
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < shape.out_count; ++i) {
    const double got = load_element(c.dtype, out, i);
    const double expected = expected_value(c, shape, i);
    const double tolerance = rounds ? std::abs(expected) * eps : 0.0;
    // Written so that NaN compares as wrong.
    if (!(std::abs(got - expected) <= tolerance)) ++wrong;
  }
  return wrong;
}

void corrupt_output(const CheckCase& c, const OpShape& shape, void* out) {
  if (!rank_has_output(c) || shape.out_count == 0) return;
  const double expected = expected_value(c, shape, 0);
  store_element(c.dtype, out, 0, expected == 1.0 ? 2.0 : 1.0);
}

}  // namespace cohort::bench
