#pragma once

// Vector types and element codecs for the reduction kernels. This header (with
// vector_kernels.hpp) is compiled once per instruction set: kernels_<isa>.cpp defines
//   COHORT_REDUCE_ISA_NAMESPACE  a namespace name unique to that translation unit
//   COHORT_REDUCE_VECTOR_BYTES   the native vector width (16, 32 or 64)
// and is built with that ISA's target flags. Everything here lives in that namespace and in an
// unnamed namespace, and uses only compiler builtins, never out-of-line library functions: an
// inline function shared between translation units built with different -m flags could be
// emitted with AVX-512 instructions and picked by the linker for the portable path.
//
// GCC vector extensions express each loop once; the compiler lowers a 64-byte vector to one zmm
// register, two ymm or four xmm registers. A codec loads kLanes stored elements into one
// "compute" vector (float for the narrow floats, which reduce in float) and stores it back,
// rounding to nearest even exactly as lib/core/float_formats.hpp does.

#if !defined(COHORT_REDUCE_ISA_NAMESPACE) || !defined(COHORT_REDUCE_VECTOR_BYTES)
#error "define COHORT_REDUCE_ISA_NAMESPACE and COHORT_REDUCE_VECTOR_BYTES before including"
#endif

#include <cstddef>
#include <cstdint>
#include <type_traits>

#if defined(__F16C__)
#include <immintrin.h>
#endif

#define COHORT_REDUCE_INLINE inline __attribute__((always_inline))

namespace cohort::reduce::COHORT_REDUCE_ISA_NAMESPACE {
namespace {

constexpr std::size_t kBytes = COHORT_REDUCE_VECTOR_BYTES;

template <class T, std::size_t Bytes>
struct VectorOf {
  typedef T type __attribute__((vector_size(Bytes)));
};
template <class T, std::size_t Bytes = kBytes>
using Vector = typename VectorOf<T, Bytes>::type;

using F32 = Vector<float>;
using U32 = Vector<std::uint32_t>;
using I32 = Vector<std::int32_t>;
// Stored elements that widen to one F32 vector.
using U16Narrow = Vector<std::uint16_t, kBytes / 2>;
using I16Narrow = Vector<std::int16_t, kBytes / 2>;
using U8Narrow = Vector<std::uint8_t, kBytes / 4>;

template <class V>
COHORT_REDUCE_INLINE V load_vector(const unsigned char* p) {
  V v;
  __builtin_memcpy(&v, p, sizeof v);  // unaligned load
  return v;
}

template <class V>
COHORT_REDUCE_INLINE void store_vector(unsigned char* p, V v) {
  __builtin_memcpy(p, &v, sizeof v);
}

// Rounds each lane of `m` (0 <= m < 2^22) to the nearest integer, ties to even, as nearbyint
// does in the default rounding mode: adding 2^23 leaves no fraction bits.
COHORT_REDUCE_INLINE F32 round_small_to_even(F32 m) {
  const F32 magic = F32{} + 0x1p23f;
  return (m + magic) - magic;
}

/// Elements stored as themselves (f32, f64, integers).
template <class T>
struct Plain {
  using Storage = T;
  using Compute = Vector<T>;
  using Unsigned = Vector<typename std::conditional_t<std::is_integral_v<T>, std::make_unsigned<T>,
                                                      std::type_identity<T>>::type>;
  using Scalar = T;
  static constexpr bool kFloating = std::is_floating_point_v<T>;
  static constexpr std::size_t kLanes = kBytes / sizeof(T);
  static COHORT_REDUCE_INLINE Compute load(const unsigned char* p) {
    return load_vector<Compute>(p);
  }
  static COHORT_REDUCE_INLINE void store(unsigned char* p, Compute v) { store_vector(p, v); }
};

/// Bool bytes; any non-zero byte reads as 1 so bitwise ops give 0 or 1.
struct BoolCodec : Plain<std::uint8_t> {
  static COHORT_REDUCE_INLINE Compute load(const unsigned char* p) {
    const Compute v = load_vector<Compute>(p);
    return reinterpret_cast<Compute>(v != 0) & 1;  // ~0 or 0 masked to 1 or 0
  }
};

/// Shared by the codecs that compute in float.
struct FloatComputed {
  using Compute = F32;
  using Scalar = float;
  static constexpr bool kFloating = true;
  static constexpr std::size_t kLanes = kBytes / 4;
};

struct Bf16Codec : FloatComputed {
  using Storage = std::uint16_t;
  static COHORT_REDUCE_INLINE F32 load(const unsigned char* p) {
    const U32 wide = __builtin_convertvector(load_vector<U16Narrow>(p), U32);
    return reinterpret_cast<F32>(wide << 16);
  }
  static COHORT_REDUCE_INLINE void store(unsigned char* p, F32 v) {
    const U32 x = reinterpret_cast<U32>(v);
    const U32 rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
    const U32 quiet_nan = (x >> 16) | 0x40u;
    const U32 result = (x & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded;
    store_vector(p, __builtin_convertvector(result, U16Narrow));
  }
};

// IEEE half <-> float. With F16C the hardware converts (exactly, and ignoring DAZ/FTZ); without
// it the bit manipulation below mirrors fp::half_to_float / fp::float_to_half lane by lane.
COHORT_REDUCE_INLINE F32 half_bits_to_float(U32 h) {
#if defined(__F16C__) && COHORT_REDUCE_VECTOR_BYTES == 64
  // The zero-masking forms: GCC 12 warns about the undefined pass-through of the plain ones.
  return reinterpret_cast<F32>(_mm512_maskz_cvtph_ps(
      0xffff, reinterpret_cast<__m256i>(__builtin_convertvector(h, U16Narrow))));
#elif defined(__F16C__) && COHORT_REDUCE_VECTOR_BYTES == 32
  return reinterpret_cast<F32>(
      _mm256_cvtph_ps(reinterpret_cast<__m128i>(__builtin_convertvector(h, U16Narrow))));
#else
  const U32 sign = (h & 0x8000u) << 16;
  const U32 magnitude = h & 0x7fffu;
  const U32 normal = (magnitude << 13) + (112u << 23);
  const U32 special = (magnitude << 13) | 0x7f800000u;  // Inf or NaN, payload kept
  // Subnormal (and zero): mantissa * 2^-24, exact; done in integers-to-float so DAZ can't bite.
  const U32 subnormal = reinterpret_cast<U32>(
      __builtin_convertvector(reinterpret_cast<I32>(magnitude), F32) * 0x1p-24f);
  const U32 bits = magnitude >= 0x7c00u ? special : magnitude < 0x400u ? subnormal : normal;
  return reinterpret_cast<F32>(bits | sign);
#endif
}

COHORT_REDUCE_INLINE U32 float_to_half_bits(F32 v) {
  const U32 x = reinterpret_cast<U32>(v);
  const U32 sign = (x >> 16) & 0x8000u;
#if defined(__F16C__) && (COHORT_REDUCE_VECTOR_BYTES == 64 || COHORT_REDUCE_VECTOR_BYTES == 32)
#if COHORT_REDUCE_VECTOR_BYTES == 64
  const U16Narrow converted = reinterpret_cast<U16Narrow>(_mm512_maskz_cvtps_ph(
      0xffff, reinterpret_cast<__m512>(v), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
#else
  const U16Narrow converted = reinterpret_cast<U16Narrow>(
      _mm256_cvtps_ph(reinterpret_cast<__m256>(v), _MM_FROUND_TO_NEAREST_INT));
#endif
  // The hardware keeps NaN payload bits; the reference makes every NaN the canonical quiet one.
  const U32 wide = __builtin_convertvector(converted, U32);
  return v != v ? (sign | 0x7e00u) : wide;
#else
  const U32 magnitude = x & 0x7fffffffu;
  const U32 special = magnitude > 0x7f800000u ? U32{} + 0x7e00u : U32{} + 0x7c00u;
  const U32 normal = ((magnitude + 0xfffu + ((magnitude >> 13) & 1u)) - (112u << 23)) >> 13;
  // Below 2^-14: count units of 2^-24 (the scaled value is < 1024, so the cast is in range).
  const I32 is_subnormal = magnitude < 0x38800000u;
  const F32 scaled = is_subnormal ? reinterpret_cast<F32>(magnitude) * 0x1p24f : F32{};
  const U32 subnormal =
      reinterpret_cast<U32>(__builtin_convertvector(round_small_to_even(scaled), I32));
  const U32 bits = magnitude >= 0x7f800000u   ? special
                   : magnitude >= 0x477ff000u ? U32{} + 0x7c00u
                   : is_subnormal             ? subnormal
                                              : normal;
  return bits | sign;
#endif
}

struct HalfCodec : FloatComputed {
  using Storage = std::uint16_t;
  static COHORT_REDUCE_INLINE F32 load(const unsigned char* p) {
    return half_bits_to_float(__builtin_convertvector(load_vector<U16Narrow>(p), U32));
  }
  static COHORT_REDUCE_INLINE void store(unsigned char* p, F32 v) {
    store_vector(p, __builtin_convertvector(float_to_half_bits(v), U16Narrow));
  }
};

// fp8 rounding for finite magnitudes, shared by both formats: the normal range rounds the
// float mantissa to kMantissaBits (ties to even) and rebiases; below the smallest normal the
// value is counted in units of the subnormal quantum. A carry out of either correctly lands on
// the next exponent.
template <int kMantissaBits, int kBias, std::uint32_t kMinNormalBits>
COHORT_REDUCE_INLINE U32 round_fp8_magnitude(U32 magnitude) {
  constexpr int kDrop = 23 - kMantissaBits;
  const U32 normal = ((magnitude + ((1u << (kDrop - 1)) - 1u) + ((magnitude >> kDrop) & 1u)) -
                      (static_cast<std::uint32_t>(127 - kBias) << 23)) >>
                     kDrop;
  const I32 is_subnormal = magnitude < kMinNormalBits;
  constexpr float kUnitsPerOne = static_cast<float>(1u << (kBias - 1 + kMantissaBits));
  const F32 scaled = is_subnormal ? reinterpret_cast<F32>(magnitude) * kUnitsPerOne : F32{};
  const U32 subnormal =
      reinterpret_cast<U32>(__builtin_convertvector(round_small_to_even(scaled), I32));
  return is_subnormal ? subnormal : normal;
}

/// OCP fp8 e4m3fn: no infinities; S.1111.111 is NaN; magnitudes above 464 (the midpoint past
/// the largest finite value, 448) become NaN.
struct E4M3Codec : FloatComputed {
  using Storage = std::uint8_t;
  static COHORT_REDUCE_INLINE F32 load(const unsigned char* p) {
    const U32 b = __builtin_convertvector(load_vector<U8Narrow>(p), U32);
    const U32 sign = (b & 0x80u) << 24;
    const U32 magnitude = b & 0x7fu;
    const U32 normal = (magnitude << 20) + (120u << 23);
    const U32 subnormal = reinterpret_cast<U32>(
        __builtin_convertvector(reinterpret_cast<I32>(magnitude), F32) * 0x1p-9f);
    const U32 bits = magnitude == 0x7fu ? U32{} + 0x7fc00000u : magnitude < 8u ? subnormal : normal;
    return reinterpret_cast<F32>(bits | sign);
  }
  static COHORT_REDUCE_INLINE void store(unsigned char* p, F32 v) {
    const U32 x = reinterpret_cast<U32>(v);
    const U32 sign = (x >> 24) & 0x80u;
    const U32 magnitude = x & 0x7fffffffu;
    const U32 finite = round_fp8_magnitude<3, 7, 0x3c800000u>(magnitude);
    const U32 bits = magnitude > 0x43e80000u ? U32{} + 0x7fu : finite;  // NaN, Inf, overflow
    store_vector(p, __builtin_convertvector(bits | sign, U8Narrow));
  }
};

/// OCP fp8 e5m2: the top byte of an IEEE half; magnitudes from 61440 (the midpoint past 57344,
/// which rounds to even upward) overflow to infinity.
struct E5M2Codec : FloatComputed {
  using Storage = std::uint8_t;
  static COHORT_REDUCE_INLINE F32 load(const unsigned char* p) {
    return half_bits_to_float(__builtin_convertvector(load_vector<U8Narrow>(p), U32) << 8);
  }
  static COHORT_REDUCE_INLINE void store(unsigned char* p, F32 v) {
    const U32 x = reinterpret_cast<U32>(v);
    const U32 sign = (x >> 24) & 0x80u;
    const U32 magnitude = x & 0x7fffffffu;
    const U32 finite = round_fp8_magnitude<2, 15, 0x38800000u>(magnitude);
    const U32 bits = magnitude > 0x7f800000u    ? U32{} + 0x7eu
                     : magnitude >= 0x47700000u ? U32{} + 0x7cu
                                                : finite;
    store_vector(p, __builtin_convertvector(bits | sign, U8Narrow));
  }
};

}  // namespace
}  // namespace cohort::reduce::COHORT_REDUCE_ISA_NAMESPACE
