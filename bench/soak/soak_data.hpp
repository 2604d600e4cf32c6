#pragma once

// What each rank puts into an op and what it must get back, computed locally from the op's
// coordinates and never by cohort: a rank's input element is a pure function of (seed, op index,
// rank, element), so any rank can compute any other rank's input, and the expected result of a
// reduction is a plain loop over the ranks.
//
// Reductions must come out exact whatever order an algorithm combines the ranks in, and cohort
// rounds a 16- or 8-bit float after every pairwise step. So float contributions are chosen so
// that every partial result of any subset of the n ranks is representable. With L the largest
// integer below which every integer is exact (8 for e5m2, 16 for e4m3, 256 for bf16, 2048 for
// f16; 2^20 is used for f32 and f64):
//  - Sum: integers in [-R, R], R = L / n.
//  - Avg: n * y_r with y_r in [-R, R]. Every x / n is then the integer y_r and every partial
//    sum of them is within L, so the mean is exact both where cohort divides each contribution
//    by n before summing (f16, bf16, fp8, as dtype.hpp documents) and where it divides the sum
//    (f32, f64: partial sums stay within n * L <= 2^24 for n <= 16).
//  - Prod: {-2, -1, 1, 2} (powers of two stay exact), or {-1, 1} where 2^n would overflow.
//  - Min, Max: arbitrary bit patterns (subnormals, infinities and NaNs included), except -0,
//    which would make the result depend on the order (equal operands keep the first).
// Integers are arbitrary bits and wrap (two's complement), which a plain loop reproduces
// exactly; integer Avg is the wrapped sum divided by n, truncating. Bool inputs are 0 or 1.
// Moving collectives copy arbitrary bit patterns (NaN payloads included).

#include <cohort/dtype.hpp>

#include <cstddef>
#include <cstdint>
#include <string>

namespace cohort::soak {

/// The coordinates every element of one op's data derives from.
struct DataSource {
  std::uint64_t seed = 0;
  std::uint64_t op_index = 0;
  DType dtype = DType::Float32;
  ReduceOp op = ReduceOp::Sum;
  int group_size = 1;  ///< ranks contributing to a reduction
};

/// Moving collectives: rank `rank`'s source elements [first, first + count), to out[0 .. count).
void fill_source(const DataSource& source, int rank, std::size_t first, std::size_t count,
                 void* out);

/// Reducing collectives: rank `rank`'s contribution, elements [first, first + count).
void fill_contribution(const DataSource& source, int rank, std::size_t first, std::size_t count,
                       void* out);

/// The reduction over ranks 0 .. group_size-1 of fill_contribution, elements [first,
/// first + count), as cohort must produce it (a NaN where the result is NaN).
void fill_reduction(const DataSource& source, std::size_t first, std::size_t count, void* out);

/// Empty when `got` equals `expected` (bytewise, except that where `expected` holds a NaN any NaN
/// is accepted); else the first differing element, with both values and both bit patterns.
std::string first_difference(DType dtype, const void* got, const void* expected, std::size_t count);

}  // namespace cohort::soak
