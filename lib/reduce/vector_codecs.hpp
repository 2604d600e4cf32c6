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
// GCC vector extensions express each loop once, at the native width of each ISA (a zmm, ymm
// or xmm register). A codec loads a block of stored elements into "compute" vectors (float for
// the narrow floats, which reduce in float) and stores them back, rounding to nearest even
// exactly as lib/core/float_formats.hpp does.

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

// A codec moves one block of kLanes stored elements (kBlockBytes bytes) to and from kParts
// compute vectors. Which element lands in which lane does not matter to element-wise ops, so
// the narrow formats split each 32-bit lane into its 16- or 8-bit pieces (even and odd
// elements in separate vectors) instead of shuffling across lanes.

/// Elements stored as themselves (f32, f64, integers).
template <class T>
struct Plain {
  using Storage = T;
  using Compute = Vector<T>;
  using Unsigned = Vector<typename std::conditional_t<std::is_integral_v<T>, std::make_unsigned<T>,
                                                      std::type_identity<T>>::type>;
  using Scalar = T;
  static constexpr bool kFloating = std::is_floating_point_v<T>;
  static constexpr int kParts = 1;
  static constexpr std::size_t kLanes = kBytes / sizeof(T);
  static COHORT_REDUCE_INLINE void load(const unsigned char* p, Compute (&v)[kParts]) {
    v[0] = load_vector<Compute>(p);
  }
  static COHORT_REDUCE_INLINE void store(unsigned char* p, const Compute (&v)[kParts]) {
    store_vector(p, v[0]);
  }
};

/// Bool bytes; any non-zero byte reads as 1 so bitwise ops give 0 or 1.
struct BoolCodec : Plain<std::uint8_t> {
  static COHORT_REDUCE_INLINE void load(const unsigned char* p, Compute (&v)[kParts]) {
    v[0] = reinterpret_cast<Compute>(load_vector<Compute>(p) != 0) & 1;  // ~0 or 0 -> 1 or 0
  }
};

/// Shared by the codecs that compute in float.
struct FloatComputed {
  using Compute = F32;
  using Scalar = float;
  static constexpr bool kFloating = true;
};

// bf16 bits in the high half of each lane of x (low half ignored) -> rounded bf16 in the high
// half: ties to even, NaN made quiet, as fp::float_to_bf16.
COHORT_REDUCE_INLINE U32 round_to_bf16_high(F32 v) {
  const U32 x = reinterpret_cast<U32>(v);
  const U32 rounded = x + 0x7fffu + ((x >> 16) & 1u);
  return (x & 0x7fffffffu) > 0x7f800000u ? (x | 0x00400000u) : rounded;
}

struct Bf16Codec : FloatComputed {
  using Storage = std::uint16_t;
  static constexpr int kParts = 2;
  static constexpr std::size_t kLanes = kBytes / 2;
  static COHORT_REDUCE_INLINE void load(const unsigned char* p, F32 (&v)[kParts]) {
    const U32 pair = load_vector<U32>(p);
    v[0] = reinterpret_cast<F32>(pair << 16);          // even elements
    v[1] = reinterpret_cast<F32>(pair & 0xffff0000u);  // odd elements
  }
  static COHORT_REDUCE_INLINE void store(unsigned char* p, const F32 (&v)[kParts]) {
    store_vector(p, (round_to_bf16_high(v[0]) >> 16) | (round_to_bf16_high(v[1]) & 0xffff0000u));
  }
};

// IEEE half bits (low 16 bits of each lane, the rest zero) <-> float, mirroring
// fp::half_to_float / fp::float_to_half lane by lane. Used where F16C is absent, and for
// e5m2, whose values are halves with the low byte zero.
COHORT_REDUCE_INLINE F32 half_bits_to_float(U32 h) {
  const U32 sign = (h & 0x8000u) << 16;
  const U32 magnitude = h & 0x7fffu;
  const U32 normal = (magnitude << 13) + (112u << 23);
  const U32 special = (magnitude << 13) | 0x7f800000u;  // Inf or NaN, payload kept
  // Subnormal (and zero): mantissa * 2^-24, exact; an int-to-float conversion so DAZ can't bite.
  const U32 subnormal = reinterpret_cast<U32>(
      __builtin_convertvector(reinterpret_cast<I32>(magnitude), F32) * 0x1p-24f);
  const U32 bits = magnitude >= 0x7c00u ? special : magnitude < 0x400u ? subnormal : normal;
  return reinterpret_cast<F32>(bits | sign);
}

COHORT_REDUCE_INLINE U32 float_to_half_bits(F32 v) {
  const U32 x = reinterpret_cast<U32>(v);
  const U32 sign = (x >> 16) & 0x8000u;
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
}

#if defined(__F16C__) && (COHORT_REDUCE_VECTOR_BYTES == 64 || COHORT_REDUCE_VECTOR_BYTES == 32)
// Rounds one vector of floats to halves with F16C and stores them in order. The hardware keeps
// NaN payload bits; the reference makes every NaN the canonical quiet one, which is what a
// float NaN with an empty payload converts to. (Also used by lib/train's cast kernels.)
COHORT_REDUCE_INLINE void store_halves_f16c(unsigned char* p, F32 v) {
  const U32 x = reinterpret_cast<U32>(v);
  const F32 w = reinterpret_cast<F32>(v != v ? (x & 0x80000000u) | 0x7fc00000u : x);
#if COHORT_REDUCE_VECTOR_BYTES == 64
  store_vector(p, _mm512_maskz_cvtps_ph(0xffff, reinterpret_cast<__m512>(w),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
#else
  store_vector(p, _mm256_cvtps_ph(reinterpret_cast<__m256>(w), _MM_FROUND_TO_NEAREST_INT));
#endif
}

// F16C converts exactly (and ignores DAZ/FTZ). A block is half a vector of halves.
struct HalfCodec : FloatComputed {
  using Storage = std::uint16_t;
  static constexpr int kParts = 1;
  static constexpr std::size_t kLanes = kBytes / 4;
  static COHORT_REDUCE_INLINE void load(const unsigned char* p, F32 (&v)[kParts]) {
#if COHORT_REDUCE_VECTOR_BYTES == 64
    // The zero-masking forms: GCC 12 warns about the undefined pass-through of the plain ones.
    v[0] = reinterpret_cast<F32>(_mm512_maskz_cvtph_ps(0xffff, load_vector<__m256i>(p)));
#else
    v[0] = reinterpret_cast<F32>(_mm256_cvtph_ps(load_vector<__m128i>(p)));
#endif
  }
  static COHORT_REDUCE_INLINE void store(unsigned char* p, const F32 (&v)[kParts]) {
    store_halves_f16c(p, v[0]);
  }
};
#else
struct HalfCodec : FloatComputed {
  using Storage = std::uint16_t;
  static constexpr int kParts = 2;
  static constexpr std::size_t kLanes = kBytes / 2;
  static COHORT_REDUCE_INLINE void load(const unsigned char* p, F32 (&v)[kParts]) {
    const U32 pair = load_vector<U32>(p);
    v[0] = half_bits_to_float(pair & 0xffffu);
    v[1] = half_bits_to_float(pair >> 16);
  }
  static COHORT_REDUCE_INLINE void store(unsigned char* p, const F32 (&v)[kParts]) {
    store_vector(p, float_to_half_bits(v[0]) | (float_to_half_bits(v[1]) << 16));
  }
};
#endif

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
struct E4M3Format {
  static COHORT_REDUCE_INLINE F32 to_float(U32 b) {  // b: one fp8 value per lane
    const U32 sign = (b & 0x80u) << 24;
    const U32 magnitude = b & 0x7fu;
    const U32 normal = (magnitude << 20) + (120u << 23);
    const U32 subnormal = reinterpret_cast<U32>(
        __builtin_convertvector(reinterpret_cast<I32>(magnitude), F32) * 0x1p-9f);
    const U32 bits = magnitude == 0x7fu ? U32{} + 0x7fc00000u : magnitude < 8u ? subnormal : normal;
    return reinterpret_cast<F32>(bits | sign);
  }
  static COHORT_REDUCE_INLINE U32 from_float(F32 v) {
    const U32 x = reinterpret_cast<U32>(v);
    const U32 sign = (x >> 24) & 0x80u;
    const U32 magnitude = x & 0x7fffffffu;
    const U32 finite = round_fp8_magnitude<3, 7, 0x3c800000u>(magnitude);
    return (magnitude > 0x43e80000u ? U32{} + 0x7fu : finite) | sign;  // NaN, Inf, overflow
  }
};

/// OCP fp8 e5m2: the top byte of an IEEE half; magnitudes from 61440 (the midpoint past 57344,
/// which rounds to even upward) overflow to infinity.
struct E5M2Format {
  static COHORT_REDUCE_INLINE F32 to_float(U32 b) { return half_bits_to_float(b << 8); }
  static COHORT_REDUCE_INLINE U32 from_float(F32 v) {
    const U32 x = reinterpret_cast<U32>(v);
    const U32 sign = (x >> 24) & 0x80u;
    const U32 magnitude = x & 0x7fffffffu;
    const U32 finite = round_fp8_magnitude<2, 15, 0x38800000u>(magnitude);
    const U32 bits = magnitude > 0x7f800000u    ? U32{} + 0x7eu
                     : magnitude >= 0x47700000u ? U32{} + 0x7cu
                                                : finite;
    return bits | sign;
  }
};

/// Four fp8 values per 32-bit lane, one float vector per byte position.
template <class Format>
struct Fp8Codec : FloatComputed {
  using Storage = std::uint8_t;
  static constexpr int kParts = 4;
  static constexpr std::size_t kLanes = kBytes;
  static COHORT_REDUCE_INLINE void load(const unsigned char* p, F32 (&v)[kParts]) {
    const U32 quad = load_vector<U32>(p);
    for (int k = 0; k < kParts; ++k) v[k] = Format::to_float((quad >> (8 * k)) & 0xffu);
  }
  static COHORT_REDUCE_INLINE void store(unsigned char* p, const F32 (&v)[kParts]) {
    U32 quad = U32{};
    for (int k = 0; k < kParts; ++k) quad |= Format::from_float(v[k]) << (8 * k);
    store_vector(p, quad);
  }
};
using E4M3Codec = Fp8Codec<E4M3Format>;
using E5M2Codec = Fp8Codec<E5M2Format>;

}  // namespace
}  // namespace cohort::reduce::COHORT_REDUCE_ISA_NAMESPACE
