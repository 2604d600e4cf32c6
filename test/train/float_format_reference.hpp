#pragma once

// An independent scalar reference for the six floating dtypes, for the training-layer kernel
// and cast tests. It knows each format only by its field widths and overflow rule and works in
// double: decoding is exact, and encoding rounds the double ONCE to nearest even with frexp,
// ldexp and nearbyint (no float intermediate), so it is the correctly rounded result for any
// source, f64 included. It shares no code with lib/core/float_formats.hpp or the kernels.
//
// Also: reading and writing elements as raw bits, comparing results (NaN compares by sign and
// NaN-ness; the narrow formats' canonical NaN by bits too), the ISAs this CPU can run.

#include <cohort/dtype.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "../reduce/isa_restorer.hpp"
#include "reduce/dispatch.hpp"

namespace cohort::train::testing {

/// A floating format by its fields. IEEE-like formats reserve the top exponent for inf and NaN;
/// OCP e4m3fn ("fn": finite and NaN only) uses it for finite values except the all-ones
/// mantissa, which is NaN, and (cohort's rule, as torch's cast) turns overflow into NaN.
struct Format {
  int exponent_bits;
  int mantissa_bits;
  bool ieee;
  std::uint64_t nan_bits;  // the canonical quiet NaN, sign cleared
};

inline Format format_of(DType dtype) {
  switch (dtype) {
    case DType::Float64: return {11, 52, true, 0x7ff8000000000000u};
    case DType::Float32: return {8, 23, true, 0x7fc00000u};
    case DType::Float16: return {5, 10, true, 0x7e00u};
    case DType::BFloat16: return {8, 7, true, 0x7fc0u};
    case DType::Float8E4M3: return {4, 3, false, 0x7fu};
    case DType::Float8E5M2: return {5, 2, true, 0x7eu};
    default: break;
  }
  throw std::logic_error("not a floating dtype");
}

inline int total_bits(const Format& f) {
  return 1 + f.exponent_bits + f.mantissa_bits;
}

inline int bias_of(const Format& f) {
  return (1 << (f.exponent_bits - 1)) - 1;
}

/// Exact value of `bits` in `dtype`.
inline double decode(DType dtype, std::uint64_t bits) {
  const Format f = format_of(dtype);
  const std::uint64_t sign_bit = std::uint64_t{1} << (total_bits(f) - 1);
  const bool negative = (bits & sign_bit) != 0;
  const std::uint64_t magnitude = bits & (sign_bit - 1);
  const std::uint64_t field = magnitude >> f.mantissa_bits;
  const std::uint64_t mantissa = magnitude & ((std::uint64_t{1} << f.mantissa_bits) - 1);
  const std::uint64_t top_field = (std::uint64_t{1} << f.exponent_bits) - 1;
  double value;
  if (f.ieee && field == top_field) {
    value = mantissa == 0 ? INFINITY : NAN;
  } else if (!f.ieee && magnitude == f.nan_bits) {
    value = NAN;
  } else if (field == 0) {
    value = std::ldexp(static_cast<double>(mantissa), 1 - bias_of(f) - f.mantissa_bits);
  } else {
    const double significand = static_cast<double>(mantissa) + std::ldexp(1.0, f.mantissa_bits);
    value = std::ldexp(significand, static_cast<int>(field) - bias_of(f) - f.mantissa_bits);
  }
  return negative ? -value : value;
}

/// `x` rounded once to nearest even in `dtype`; NaN becomes the canonical NaN (sign kept),
/// overflow becomes inf (NaN for e4m3).
inline std::uint64_t encode(DType dtype, double x) {
  const Format f = format_of(dtype);
  const int m = f.mantissa_bits;
  const std::uint64_t sign = std::signbit(x) ? std::uint64_t{1} << (total_bits(f) - 1) : 0;
  const std::uint64_t top_field = (std::uint64_t{1} << f.exponent_bits) - 1;
  const std::uint64_t inf_bits = top_field << m;
  const std::uint64_t overflow = f.ieee ? inf_bits : f.nan_bits;
  const std::uint64_t max_finite = f.ieee ? inf_bits - 1 : f.nan_bits - 1;
  if (std::isnan(x)) return sign | f.nan_bits;
  if (std::isinf(x)) return sign | overflow;
  const double magnitude = std::fabs(x);
  if (magnitude == 0.0) return sign;
  int frexp_exponent = 0;
  std::frexp(magnitude, &frexp_exponent);  // magnitude in [2^(e-1), 2^e)
  const int min_exponent = 1 - bias_of(f);
  int exponent = std::max(frexp_exponent - 1, min_exponent);
  // The value in units of the quantum at `exponent` (exact: a power-of-two scaling of a
  // double), rounded once, ties to even.
  double units = std::nearbyint(std::ldexp(magnitude, m - exponent));
  if (units == std::ldexp(1.0, m + 1)) {  // rounded up into the next binade
    units /= 2;
    ++exponent;
  }
  if (units < std::ldexp(1.0, m)) return sign | static_cast<std::uint64_t>(units);  // subnormal
  const int field = exponent + bias_of(f);
  if (field > static_cast<int>(top_field)) return sign | overflow;
  const std::uint64_t bits = (static_cast<std::uint64_t>(field) << m) |
                             (static_cast<std::uint64_t>(units) - (std::uint64_t{1} << m));
  return bits > max_finite ? sign | overflow : sign | bits;
}

inline std::uint64_t read_bits(DType dtype, const void* data, std::size_t index) {
  const std::size_t size = dtype_size(dtype);
  std::uint64_t bits = 0;  // little-endian: the low bytes
  std::memcpy(&bits, static_cast<const unsigned char*>(data) + index * size, size);
  return bits;
}

inline void write_bits(DType dtype, void* data, std::size_t index, std::uint64_t bits) {
  const std::size_t size = dtype_size(dtype);
  std::memcpy(static_cast<unsigned char*>(data) + index * size, &bits, size);
}

/// Whether a kernel's `actual` bits are the reference's `expected`: identical, or both NaN of
/// the same sign (f32, f64 and bf16 keep NaN payloads, which the reference does not model);
/// f16 and fp8 must also give the canonical NaN bits.
inline bool same_result(DType dtype, std::uint64_t expected, std::uint64_t actual) {
  const double want = decode(dtype, expected);
  if (!std::isnan(want)) return expected == actual;
  const double got = decode(dtype, actual);
  if (!std::isnan(got) || std::signbit(got) != std::signbit(want)) return false;
  const bool canonical_nan =
      dtype == DType::Float16 || dtype == DType::Float8E4M3 || dtype == DType::Float8E5M2;
  return !canonical_nan || expected == actual;
}

inline constexpr DType kFloatDTypes[] = {DType::Float32,  DType::Float64,    DType::Float16,
                                         DType::BFloat16, DType::Float8E4M3, DType::Float8E5M2};

/// The instruction sets this CPU can run, portable first.
inline std::vector<reduce::Isa> available_isas() {
  std::vector<reduce::Isa> isas;
  for (reduce::Isa isa : {reduce::Isa::Portable, reduce::Isa::Avx2, reduce::Isa::Avx512})
    if (reduce::isa_available(isa)) isas.push_back(isa);
  return isas;
}

using reduce::testing::IsaRestorer;

}  // namespace cohort::train::testing
