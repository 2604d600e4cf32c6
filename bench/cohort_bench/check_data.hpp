#pragma once

// Deterministic per-rank input data and the expected result of each op, computed locally
// without any communication, so the check cannot share a bug with the code it checks.
//
// Every value is a small integer chosen so that the exact result fits the dtype: sums over all
// ranks stay within the range where the dtype holds integers exactly (256 for bfloat16, 2048 for
// half, 127 for int8), and products are at most 6. Only avg of floats can round, by at most one
// unit in the last place.

#include "ops.hpp"

#include <cohort/dtype.hpp>

#include <cstddef>

namespace cohort::bench {

struct CheckCase {
  BenchOp op = BenchOp::Allreduce;
  DType dtype = DType::Float32;
  ReduceOp redop = ReduceOp::Sum;
  int root = 0;
  int world_size = 1;
  int rank = 0;
};

/// Element `index` of rank `source_rank`'s input.
double input_value(const CheckCase& c, int source_rank, std::size_t index);

/// The expected value at output element `out_index` on rank c.rank, for an op of `shape`.
double expected_value(const CheckCase& c, const OpShape& shape, std::size_t out_index);

/// Whether rank c.rank's output is defined (reduce and gather: root only; barrier: never).
bool rank_has_output(const CheckCase& c) noexcept;

/// Writes this rank's input (input_value(c, c.rank, j) for j < count) to `in`.
void fill_input(const CheckCase& c, void* in, std::size_t count);

/// Fills `count` elements with all-ones bytes: NaN for floats, -1 or the maximum for integers,
/// a value no op here produces, so an element the op failed to write is counted wrong.
void fill_sentinel(DType dtype, void* out, std::size_t count);

/// Number of output elements on this rank that differ from expected_value (NaN always
/// differs). Floats compare exactly, except avg, which allows one unit in the last place.
std::size_t count_wrong(const CheckCase& c, const OpShape& shape, const void* out);

/// Test-only fault injection: overwrites output element 0 with a value that differs from the
/// expected one. Does nothing when this rank has no output or the output is empty.
void corrupt_output(const CheckCase& c, const OpShape& shape, void* out);

}  // namespace cohort::bench
