#pragma once

// Deterministic per-rank data for the algorithm sweep and the references it is checked against,
// computed locally and independently of the algorithms and the reduction kernels.
//
// Floating-point data are small integers (in [-8, 8] for sum/min/max, in {-2, -1, 1, 2} for
// prod), so every partial result on up to 8 ranks is exactly representable even in bf16: sums
// and products come out bit-exact whatever order an algorithm combines them in, and the sweep
// compares floats with zero tolerance. Integer data are full-width pseudo-random bits; integer
// arithmetic wraps, so the reference is exact too.

#include <cohort/dtype.hpp>

#include <cstddef>
#include <cstdint>
#include <string>

namespace cohort::sweep {

/// What output bytes hold before an op writes them, so a byte it should have written and did not
/// shows (one definition for every sweep file: they share a unity translation unit).
inline constexpr unsigned char kPoison = 0xa5;

/// Ops the algorithms see for this dtype (Avg arrives as Sum, so it is not swept).
bool op_applies(ReduceOp op, DType dtype);

/// Element i (i in [first, first + count)) of rank `rank`'s contribution, written to out[i -
/// first].
void fill_contribution(DType dtype, ReduceOp op, int rank, std::uint64_t salt, std::size_t first,
                       std::size_t count, void* out);

/// op over ranks 0..world_size-1 of fill_contribution, for elements [first, first + count).
void fill_reference(DType dtype, ReduceOp op, int world_size, std::uint64_t salt, std::size_t first,
                    std::size_t count, void* out);

/// Empty when equal byte for byte; otherwise the first differing element, both values.
std::string first_mismatch(DType dtype, const void* got, const void* expected, std::size_t count);

}  // namespace cohort::sweep
