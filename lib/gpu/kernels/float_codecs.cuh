#pragma once

// Element codecs of the training kernels: stored f16 / bf16 / fp8 bits <-> float, f32 <-> f64,
// and the multiply, each giving the same bits as the CPU kernels
// (lib/train/kernels/float_kernels_impl.hpp over lib/reduce/vector_codecs.hpp, run on x86).
//
// The bit math of the narrow formats is vector_codecs.hpp's, lane for lane. What needs care is
// NaN: x86 (SSE/AVX) propagates a NaN operand's payload with the quiet bit set and makes a new
// NaN (inf * 0) the negative "indefinite" 0xffc00000, while the GPU's arithmetic and
// conversions return the canonical 0x7fffffff. The payload is visible in f32, f64 and bf16
// results, so every operation below handles NaN by bits and gives the hardware only non-NaN
// operands, where IEEE round-to-nearest-even leaves no choice. On the device each operation is
// an explicit _rn intrinsic, so nothing is contracted into an FMA.
//
// The functions are also host code (plain C++ when no CUDA compiler is involved), so
// test/gpu/device_codecs_test.cpp checks this exact logic against train::kernels on machines
// without a GPU.

#include <cohort/dtype.hpp>

#include <bit>
#include <cstddef>
#include <cstdint>

#if defined(__CUDACC__)
#define COHORT_CODEC __host__ __device__ __forceinline__
#else
#define COHORT_CODEC inline
#endif

namespace cohort::gpu::kernels::codec {

// ---- Primitives: the device's intrinsics, or their host equivalents -------------------------

COHORT_CODEC std::uint32_t bits(float x) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(x);
#else
  return std::bit_cast<std::uint32_t>(x);
#endif
}
COHORT_CODEC std::uint64_t bits(double x) {
#if defined(__CUDA_ARCH__)
  return static_cast<std::uint64_t>(__double_as_longlong(x));
#else
  return std::bit_cast<std::uint64_t>(x);
#endif
}
COHORT_CODEC float f32(std::uint32_t b) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(b);
#else
  return std::bit_cast<float>(b);
#endif
}
COHORT_CODEC double f64(std::uint64_t b) {
#if defined(__CUDA_ARCH__)
  return __longlong_as_double(static_cast<long long>(b));
#else
  return std::bit_cast<double>(b);
#endif
}
// Rounded to nearest even, subnormals kept; callers pass no NaN.
COHORT_CODEC float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
COHORT_CODEC double mul_rn(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dmul_rn(a, b);
#else
  return a * b;
#endif
}
COHORT_CODEC float add_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
COHORT_CODEC float sub_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}
COHORT_CODEC float to_float_rn(double d) {
#if defined(__CUDA_ARCH__)
  return __double2float_rn(d);
#else
  return static_cast<float>(d);
#endif
}

// ---- f32 / f64 with x86's NaN conventions ------------------------------------------------------

COHORT_CODEC bool is_nan(float x) {
  return (bits(x) & 0x7fffffffu) > 0x7f800000u;
}
COHORT_CODEC bool is_nan(double x) {
  return (bits(x) & 0x7fffffffffffffffull) > 0x7ff0000000000000ull;
}
/// NaN or infinite: the exponent field is all ones (the unscale check).
COHORT_CODEC bool non_finite(float x) {
  return (bits(x) & 0x7f800000u) == 0x7f800000u;
}
COHORT_CODEC bool non_finite(double x) {
  return (bits(x) & 0x7ff0000000000000ull) == 0x7ff0000000000000ull;
}

COHORT_CODEC float quiet(float x) {
  return f32(bits(x) | 0x00400000u);
}
COHORT_CODEC double quiet(double x) {
  return f64(bits(x) | 0x0008000000000000ull);
}

/// a * b rounded to nearest even, as mulps/mulpd give it: a NaN operand comes back quieted (the
/// first one when both are), an invalid product (inf * 0) is the indefinite NaN.
COHORT_CODEC float mul(float a, float b) {
  if (is_nan(a)) return quiet(a);
  if (is_nan(b)) return quiet(b);
  const float r = mul_rn(a, b);
  return is_nan(r) ? f32(0xffc00000u) : r;
}
COHORT_CODEC double mul(double a, double b) {
  if (is_nan(a)) return quiet(a);
  if (is_nan(b)) return quiet(b);
  const double r = mul_rn(a, b);
  return is_nan(r) ? f64(0xfff8000000000000ull) : r;
}

/// float -> double (cvtps2pd): exact; a NaN keeps sign and payload, quieted.
COHORT_CODEC double widen(float x) {
  if (!is_nan(x)) return static_cast<double>(x);
  const std::uint64_t b = bits(x);
  return f64(((b & 0x80000000u) << 32) | 0x7ff8000000000000ull | ((b & 0x007fffffu) << 29));
}

/// double -> float rounded to nearest even (cvtpd2ps), subnormals kept; a NaN keeps sign and the
/// payload's top bits, quieted.
COHORT_CODEC float narrow(double d) {
  if (!is_nan(d)) return to_float_rn(d);
  const std::uint64_t b = bits(d);
  return f32(static_cast<std::uint32_t>((b >> 32) & 0x80000000u) | 0x7fc00000u |
             static_cast<std::uint32_t>((b >> 29) & 0x007fffffu));
}

/// double -> float rounded to odd (float_kernels_impl.hpp's narrow_to_odd): the nearest-even
/// result stepped one unit toward zero where it rounded away, then the last bit set where the
/// conversion was inexact, so a second rounding to a narrower format is correct.
COHORT_CODEC float narrow_to_odd(double d) {
  const float nearest = narrow(d);
  const double back = widen(nearest);
  const std::uint64_t magnitude = 0x7fffffffffffffffull;
  const bool away = f64(bits(back) & magnitude) > f64(bits(d) & magnitude);  // false for NaN
  const bool inexact = !(back == d);                                         // true for NaN
  std::uint32_t b = bits(nearest);
  b -= away ? 1u : 0u;
  b |= inexact ? 1u : 0u;
  return f32(b);
}

// ---- IEEE half <-> float (vector_codecs.hpp's half_bits_to_float / float_to_half_bits) -------

COHORT_CODEC float half_bits_to_float(std::uint32_t h) {
  const std::uint32_t sign = (h & 0x8000u) << 16;
  const std::uint32_t magnitude = h & 0x7fffu;
  std::uint32_t b;
  if (magnitude >= 0x7c00u) {
    b = (magnitude << 13) | 0x7f800000u;  // inf or NaN, payload kept
  } else if (magnitude < 0x400u) {
    b = bits(mul_rn(static_cast<float>(magnitude), 0x1p-24f));  // exact
  } else {
    b = (magnitude << 13) + (112u << 23);
  }
  return f32(b | sign);
}

// Rounds 0 <= m < 2^22 to an integer, ties to even (vector_codecs.hpp's round_small_to_even).
COHORT_CODEC float round_small_to_even(float m) {
  return sub_rn(add_rn(m, 0x1p23f), 0x1p23f);
}

COHORT_CODEC std::uint32_t float_to_half_bits(float v) {
  const std::uint32_t x = bits(v);
  const std::uint32_t sign = (x >> 16) & 0x8000u;
  const std::uint32_t magnitude = x & 0x7fffffffu;
  if (magnitude >= 0x7f800000u) return sign | (magnitude > 0x7f800000u ? 0x7e00u : 0x7c00u);
  if (magnitude >= 0x477ff000u) return sign | 0x7c00u;  // rounds past 65504
  if (magnitude < 0x38800000u) {                        // subnormal: units of 2^-24
    const float units = round_small_to_even(mul_rn(f32(magnitude), 0x1p24f));
    return sign | static_cast<std::uint32_t>(units);
  }
  return sign | (((magnitude + 0xfffu + ((magnitude >> 13) & 1u)) - (112u << 23)) >> 13);
}

// ---- bf16 (vector_codecs.hpp's round_to_bf16_high) ---------------------------------------------

COHORT_CODEC std::uint32_t float_to_bf16_bits(float v) {
  const std::uint32_t x = bits(v);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (x | 0x00400000u) >> 16;  // NaN: quiet, payload
  return (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
}

// ---- fp8 (vector_codecs.hpp's E4M3Format / E5M2Format) ---------------------------------------

template <int kMantissaBits, int kBias, std::uint32_t kMinNormalBits>
COHORT_CODEC std::uint32_t round_fp8_magnitude(std::uint32_t magnitude) {
  constexpr int kDrop = 23 - kMantissaBits;
  if (magnitude < kMinNormalBits) {  // subnormal: units of the smallest subnormal
    constexpr float kUnitsPerOne = static_cast<float>(1u << (kBias - 1 + kMantissaBits));
    return static_cast<std::uint32_t>(round_small_to_even(mul_rn(f32(magnitude), kUnitsPerOne)));
  }
  return ((magnitude + ((1u << (kDrop - 1)) - 1u) + ((magnitude >> kDrop) & 1u)) -
          (static_cast<std::uint32_t>(127 - kBias) << 23)) >>
         kDrop;
}

/// OCP e4m3fn: no infinities; S.1111.111 is NaN; NaN, inf and magnitudes above 464 become NaN.
COHORT_CODEC float e4m3_to_float(std::uint32_t fp8) {
  const std::uint32_t sign = (fp8 & 0x80u) << 24;
  const std::uint32_t magnitude = fp8 & 0x7fu;
  std::uint32_t b;
  if (magnitude == 0x7fu) {
    b = 0x7fc00000u;
  } else if (magnitude < 8u) {
    b = bits(mul_rn(static_cast<float>(magnitude), 0x1p-9f));  // exact
  } else {
    b = (magnitude << 20) + (120u << 23);
  }
  return f32(b | sign);
}
COHORT_CODEC std::uint32_t float_to_e4m3(float v) {
  const std::uint32_t x = bits(v);
  const std::uint32_t sign = (x >> 24) & 0x80u;
  const std::uint32_t magnitude = x & 0x7fffffffu;
  if (magnitude > 0x43e80000u) return sign | 0x7fu;
  return sign | round_fp8_magnitude<3, 7, 0x3c800000u>(magnitude);
}

/// OCP e5m2: the top byte of an IEEE half; magnitudes from 61440 overflow to infinity.
COHORT_CODEC float e5m2_to_float(std::uint32_t b) {
  return half_bits_to_float(b << 8);
}
COHORT_CODEC std::uint32_t float_to_e5m2(float v) {
  const std::uint32_t x = bits(v);
  const std::uint32_t sign = (x >> 24) & 0x80u;
  const std::uint32_t magnitude = x & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return sign | 0x7eu;
  if (magnitude >= 0x47700000u) return sign | 0x7cu;
  return sign | round_fp8_magnitude<2, 15, 0x38800000u>(magnitude);
}

// ---- Element access by dtype ------------------------------------------------------------------

/// Element i of a non-f64 array, widened to float exactly (NaN payloads as the CPU loads them).
template <DType D>
COHORT_CODEC float load(const void* data, std::size_t i) {
  if constexpr (D == DType::Float32) {
    return static_cast<const float*>(data)[i];
  } else if constexpr (D == DType::Float16) {
    return half_bits_to_float(static_cast<const std::uint16_t*>(data)[i]);
  } else if constexpr (D == DType::BFloat16) {
    return f32(static_cast<std::uint32_t>(static_cast<const std::uint16_t*>(data)[i]) << 16);
  } else if constexpr (D == DType::Float8E4M3) {
    return e4m3_to_float(static_cast<const std::uint8_t*>(data)[i]);
  } else {
    static_assert(D == DType::Float8E5M2);
    return e5m2_to_float(static_cast<const std::uint8_t*>(data)[i]);
  }
}

/// Element i of any of the six dtypes as a double (exact).
template <DType D>
COHORT_CODEC double load_wide(const void* data, std::size_t i) {
  if constexpr (D == DType::Float64) {
    return static_cast<const double*>(data)[i];
  } else {
    return widen(load<D>(data, i));
  }
}

/// Writes v rounded to nearest even into element i of a non-f64 array.
template <DType D>
COHORT_CODEC void store(void* data, std::size_t i, float v) {
  if constexpr (D == DType::Float32) {
    static_cast<float*>(data)[i] = v;
  } else if constexpr (D == DType::Float16) {
    static_cast<std::uint16_t*>(data)[i] = static_cast<std::uint16_t>(float_to_half_bits(v));
  } else if constexpr (D == DType::BFloat16) {
    static_cast<std::uint16_t*>(data)[i] = static_cast<std::uint16_t>(float_to_bf16_bits(v));
  } else if constexpr (D == DType::Float8E4M3) {
    static_cast<std::uint8_t*>(data)[i] = static_cast<std::uint8_t>(float_to_e4m3(v));
  } else {
    static_assert(D == DType::Float8E5M2);
    static_cast<std::uint8_t*>(data)[i] = static_cast<std::uint8_t>(float_to_e5m2(v));
  }
}

/// Writes a double rounded once to nearest even into element i (float_kernels_impl.hpp's
/// store_wide: f32 directly, the narrower formats through float rounded to odd).
template <DType D>
COHORT_CODEC void store_wide(void* data, std::size_t i, double v) {
  if constexpr (D == DType::Float64) {
    static_cast<double*>(data)[i] = v;
  } else if constexpr (D == DType::Float32) {
    static_cast<float*>(data)[i] = narrow(v);
  } else {
    store<D>(data, i, narrow_to_odd(v));
  }
}

/// One element of train::kernels::convert: dst[i] = src[i] * factor rounded once to D (in f64
/// when either side is f64, in float otherwise). Returns whether src[i] is NaN or infinite.
template <DType S, DType D>
COHORT_CODEC bool convert_element(const void* src, void* dst, std::size_t i, float factor) {
  if constexpr (S == DType::Float64 || D == DType::Float64) {
    const double x = load_wide<S>(src, i);
    store_wide<D>(dst, i, mul(x, static_cast<double>(factor)));
    return non_finite(x);
  } else {
    const float x = load<S>(src, i);
    store<D>(dst, i, mul(x, factor));
    return non_finite(x);
  }
}

}  // namespace cohort::gpu::kernels::codec
