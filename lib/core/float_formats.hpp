#pragma once

// Scalar conversions between float and the 16- and 8-bit floating formats cohort stores, all
// rounding to nearest even. These are the reference semantics; the vectorised reduction kernels
// in lib/reduce must agree with them bit for bit.
//
//   half  (IEEE binary16): 1-5-10, bias 15, max 65504.
//   bf16  (bfloat16):      1-8-7, the top half of a float.
//   e4m3  (OCP fp8 e4m3fn): 1-4-3, bias 7, max 448, no infinities; S.1111.111 is NaN.
//                           Finite values beyond the range become NaN (as torch's cast does).
//   e5m2  (OCP fp8 e5m2):   1-5-2, bias 15, max 57344, IEEE-like infinities and NaNs.

#include <cohort/dtype.hpp>

#include <bit>
#include <cmath>
#include <cstdint>

namespace cohort::fp {

inline float half_to_float(std::uint16_t h) noexcept {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exponent = (h >> 10) & 0x1fu;
  const std::uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0) {
    // Zero or subnormal: the value is mantissa * 2^-24, exact in float.
    const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    return std::bit_cast<float>(sign | std::bit_cast<std::uint32_t>(magnitude));
  }
  if (exponent == 31) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  return std::bit_cast<float>(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

inline std::uint16_t float_to_half(float f) noexcept {
  std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  const std::uint16_t sign = static_cast<std::uint16_t>((x >> 16) & 0x8000u);
  x &= 0x7fffffffu;
  if (x >= 0x7f800000u)  // Inf stays Inf, NaN stays a (quiet) NaN
    return sign | (x > 0x7f800000u ? 0x7e00u : 0x7c00u);
  if (x >= 0x477ff000u) return sign | 0x7c00u;  // >= 65520 rounds past the largest half
  if (x < 0x38800000u) {
    // Below 2^-14 the result is subnormal: count units of 2^-24. Scaling by a power of two is
    // exact and nearbyint rounds half to even; 1024 units correctly encode the smallest normal.
    const float units = std::nearbyint(std::bit_cast<float>(x) * 16777216.0f);
    return sign | static_cast<std::uint16_t>(units);
  }
  // Normal: round the 23-bit mantissa to 10 bits (ties to even), then rebias 127 -> 15. A carry
  // out of the mantissa correctly bumps the exponent.
  x += 0xfffu + ((x >> 13) & 1u);
  x -= 112u << 23;
  return sign | static_cast<std::uint16_t>(x >> 13);
}

inline float bf16_to_float(std::uint16_t b) noexcept {
  return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16);
}

inline std::uint16_t float_to_bf16(float f) noexcept {
  std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((x >> 16) | 0x40u);
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<std::uint16_t>(x >> 16);
}

/// Layout of an 8-bit float: 1 sign bit, kExponentBits, kMantissaBits.
struct Fp8Format {
  int exponent_bits;
  int mantissa_bits;
  int bias;
  bool has_infinity;           // e5m2: yes; e4m3fn: no (all-ones is NaN, the rest is finite)
  std::uint8_t max_magnitude;  // bit pattern of the largest finite value, sign cleared
  std::uint8_t nan_pattern;    // canonical quiet NaN, sign cleared
};

inline constexpr Fp8Format kE4M3{4, 3, 7, false, 0x7e, 0x7f};
inline constexpr Fp8Format kE5M2{5, 2, 15, true, 0x7b, 0x7e};

inline float fp8_to_float(std::uint8_t v, const Fp8Format& fmt) noexcept {
  const bool negative = (v & 0x80u) != 0;
  const std::uint8_t bits = v & 0x7fu;
  const int exponent = bits >> fmt.mantissa_bits;
  const int mantissa = bits & ((1 << fmt.mantissa_bits) - 1);
  const int max_exponent = (1 << fmt.exponent_bits) - 1;
  float magnitude;
  if (fmt.has_infinity && exponent == max_exponent) {
    magnitude = mantissa == 0 ? INFINITY : NAN;
  } else if (!fmt.has_infinity && bits == 0x7f) {
    magnitude = NAN;
  } else if (exponent == 0) {
    magnitude = std::ldexp(static_cast<float>(mantissa), 1 - fmt.bias - fmt.mantissa_bits);
  } else {
    magnitude = std::ldexp(static_cast<float>(mantissa + (1 << fmt.mantissa_bits)),
                           exponent - fmt.bias - fmt.mantissa_bits);
  }
  return negative ? -magnitude : magnitude;
}

inline std::uint8_t float_to_fp8(float f, const Fp8Format& fmt) noexcept {
  const std::uint8_t sign = std::signbit(f) ? 0x80u : 0u;
  if (std::isnan(f)) return sign | fmt.nan_pattern;
  const std::uint8_t overflow =
      fmt.has_infinity ? static_cast<std::uint8_t>(0x7cu) : fmt.nan_pattern;
  if (std::isinf(f)) return sign | overflow;
  const double magnitude = std::fabs(static_cast<double>(f));
  if (magnitude == 0.0) return sign;
  int frexp_exponent = 0;
  std::frexp(magnitude, &frexp_exponent);  // magnitude = m * 2^e with m in [0.5, 1)
  const int min_exponent = 1 - fmt.bias;
  int exponent = std::max(frexp_exponent - 1, min_exponent);
  // Count units of the quantum at this exponent; nearbyint rounds ties to even.
  double units = std::nearbyint(std::ldexp(magnitude, fmt.mantissa_bits - exponent));
  const double implicit_one = std::ldexp(1.0, fmt.mantissa_bits);
  if (units >= 2 * implicit_one) {  // rounding carried into the next binade
    units /= 2;
    ++exponent;
  }
  std::uint32_t encoded;
  if (units < implicit_one) {
    encoded = static_cast<std::uint32_t>(units);  // subnormal (exponent field 0)
  } else {
    const int biased = exponent + fmt.bias;
    if (biased >= (1 << fmt.exponent_bits)) return sign | overflow;
    encoded = (static_cast<std::uint32_t>(biased) << fmt.mantissa_bits) |
              static_cast<std::uint32_t>(units - implicit_one);
  }
  if (encoded > fmt.max_magnitude) return sign | overflow;
  return sign | static_cast<std::uint8_t>(encoded);
}

inline float e4m3_to_float(std::uint8_t v) noexcept {
  return fp8_to_float(v, kE4M3);
}
inline std::uint8_t float_to_e4m3(float f) noexcept {
  return float_to_fp8(f, kE4M3);
}
inline float e5m2_to_float(std::uint8_t v) noexcept {
  return fp8_to_float(v, kE5M2);
}
inline std::uint8_t float_to_e5m2(float f) noexcept {
  return float_to_fp8(f, kE5M2);
}

/// Reads element `index` of `data` (of `dtype`) as a double (exact for all but 64-bit integers
/// beyond 2^53).
double load_as_double(DType dtype, const void* data, std::size_t index) noexcept;
/// Writes `value` converted to `dtype` at element `index`: floats round to nearest even,
/// integers round toward zero and saturate at the type's range (NaN becomes 0), Bool is value != 0.
void store_from_double(DType dtype, void* data, std::size_t index, double value) noexcept;

}  // namespace cohort::fp
