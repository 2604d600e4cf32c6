#pragma once

// The training layer's element-wise loops and the kernel table of one instruction set. Like
// lib/reduce/vector_kernels.hpp this header is compiled once per ISA: float_kernels_<isa>.cpp
// defines COHORT_REDUCE_ISA_NAMESPACE (a name unique to that translation unit, distinct from
// lib/reduce's) and COHORT_REDUCE_VECTOR_BYTES (16, 32 or 64) and is built with that ISA's
// flags. Everything below has internal linkage, for the reason vector_codecs.hpp gives.
//
// Element order. The reduction codecs may permute elements inside a block (bf16 even/odd
// halves, fp8 byte positions) because they combine two buffers of the same dtype. A conversion
// writes element i of one dtype from element i of another, so the codecs here keep natural
// order: a block is kLanes elements, one per 32-bit lane of a native vector, widened by
// zero-extension (vpmovzx) or F16C and narrowed by truncation (vpmov) or F16C. The per-lane bit
// math (half, bf16 and fp8 rounding) is lib/reduce's.
//
// Rounding. Without f64 on either side a block is computed in float: exact widening, one float
// multiply, one round-to-nearest-even narrowing. With f64 it is computed in double and rounded
// once: double -> float is plain RNE, and double -> half/bf16/fp8 goes through float rounded to
// odd (truncate, then set the last bit if anything was dropped), which makes the second
// rounding see the sticky information and give the correctly rounded result.
//
// Tails. Every element goes through the same block code: the last partial block is copied into
// zero-padded stack buffers (zero is finite and neutral for every norm part), so no result
// depends on where a block boundary falls.
//
// Like lib/reduce's, these kernels keep subnormals: they leave MXCSR alone and assume the caller
// has not set FTZ/DAZ.

#include <cstddef>
#include <cstdint>
#include <utility>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "reduce/vector_codecs.hpp"
#include "train/kernels/float_kernel_table.hpp"

namespace cohort::train::kernels::COHORT_REDUCE_ISA_NAMESPACE {
namespace {

using namespace cohort::reduce::COHORT_REDUCE_ISA_NAMESPACE;

constexpr std::size_t kLanes = kBytes / 4;  // elements per block: one per 32-bit lane
constexpr std::size_t kHalfLanes = kLanes / 2;

using U8 = Vector<std::uint8_t, kBytes / 4>;    // kLanes fp8 values
using U16 = Vector<std::uint16_t, kBytes / 2>;  // kLanes half / bf16 values
using F64 = Vector<double>;                     // half a block, in double
using U64 = Vector<std::uint64_t>;
using I64 = Vector<std::int64_t>;
using F32Half = Vector<float, kBytes / 2>;  // half a block, in float
using U32Half = Vector<std::uint32_t, kBytes / 2>;
using I32Half = Vector<std::int32_t, kBytes / 2>;

template <std::size_t kFirst, std::size_t... I>
COHORT_REDUCE_INLINE F32Half half_of(F32 v, std::index_sequence<I...>) {
  return __builtin_shufflevector(v, v, (kFirst + I)...);
}

template <std::size_t... I>
COHORT_REDUCE_INLINE F32 join(F32Half low, F32Half high, std::index_sequence<I...>) {
  return __builtin_shufflevector(low, high, I...);
}

COHORT_REDUCE_INLINE F32 join(F32Half low, F32Half high) {
  return join(low, high, std::make_index_sequence<kLanes>{});
}

// ---- Width changes in natural order: kLanes 16- or 8-bit values <-> kLanes 32-bit lanes. ------
// GCC's __builtin_convertvector handles these sub-register vectors poorly on x86 (it extracts
// lanes one by one for 8-bit values without AVX-512), so x86 spells them with the zero-extending
// moves and saturating packs each ISA has; the narrowing callers guarantee every lane fits.
// (AVX-512 uses the zero-masking forms: GCC 12 warns about the undefined pass-through of the
// plain ones.)

COHORT_REDUCE_INLINE U32 widen_u16(const unsigned char* p) {
#if COHORT_REDUCE_VECTOR_BYTES == 64 && defined(__AVX512F__)
  return reinterpret_cast<U32>(_mm512_maskz_cvtepu16_epi32(0xffff, load_vector<__m256i>(p)));
#elif COHORT_REDUCE_VECTOR_BYTES == 32 && defined(__AVX2__)
  return reinterpret_cast<U32>(_mm256_cvtepu16_epi32(load_vector<__m128i>(p)));
#elif COHORT_REDUCE_VECTOR_BYTES == 16 && defined(__SSE2__)
  return reinterpret_cast<U32>(_mm_unpacklo_epi16(
      _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)), _mm_setzero_si128()));
#else
  return __builtin_convertvector(load_vector<U16>(p), U32);
#endif
}

COHORT_REDUCE_INLINE U32 widen_u8(const unsigned char* p) {
#if COHORT_REDUCE_VECTOR_BYTES == 64 && defined(__AVX512F__)
  return reinterpret_cast<U32>(_mm512_maskz_cvtepu8_epi32(0xffff, load_vector<__m128i>(p)));
#elif COHORT_REDUCE_VECTOR_BYTES == 32 && defined(__AVX2__)
  return reinterpret_cast<U32>(
      _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
#elif COHORT_REDUCE_VECTOR_BYTES == 16 && defined(__SSE2__)
  const __m128i zero = _mm_setzero_si128();
  const __m128i bytes = _mm_cvtsi32_si128(load_vector<int>(p));
  return reinterpret_cast<U32>(_mm_unpacklo_epi16(_mm_unpacklo_epi8(bytes, zero), zero));
#else
  return __builtin_convertvector(load_vector<U8>(p), U32);
#endif
}

// Every lane of v is below 2^16.
COHORT_REDUCE_INLINE void narrow_u16(unsigned char* p, U32 v) {
#if COHORT_REDUCE_VECTOR_BYTES == 64 && defined(__AVX512F__)
  store_vector(p, _mm512_maskz_cvtepi32_epi16(0xffff, reinterpret_cast<__m512i>(v)));
#elif COHORT_REDUCE_VECTOR_BYTES == 32 && defined(__AVX2__)
  // The pack works within 128-bit halves: [v0-3 v0-3 | v4-7 v4-7]; gather quadwords 0 and 2.
  const __m256i packed =
      _mm256_packus_epi32(reinterpret_cast<__m256i>(v), reinterpret_cast<__m256i>(v));
  store_vector(p, _mm256_castsi256_si128(_mm256_permute4x64_epi64(packed, 0x08)));
#elif COHORT_REDUCE_VECTOR_BYTES == 16 && defined(__SSE2__)
  // SSE2 packs signed 32 -> 16 bits with saturation: shift the range to signed and back.
  const __m128i bias = _mm_set1_epi32(0x8000);
  const __m128i packed =
      _mm_packs_epi32(_mm_sub_epi32(reinterpret_cast<__m128i>(v), bias), _mm_setzero_si128());
  _mm_storel_epi64(reinterpret_cast<__m128i*>(p), _mm_xor_si128(packed, _mm_set1_epi16(-0x8000)));
#else
  store_vector(p, __builtin_convertvector(v, U16));
#endif
}

// Every lane of v is below 2^8.
COHORT_REDUCE_INLINE void narrow_u8(unsigned char* p, U32 v) {
#if COHORT_REDUCE_VECTOR_BYTES == 64 && defined(__AVX512F__)
  store_vector(p, _mm512_maskz_cvtepi32_epi8(0xffff, reinterpret_cast<__m512i>(v)));
#elif COHORT_REDUCE_VECTOR_BYTES == 32 && defined(__AVX2__)
  const __m256i words =
      _mm256_packus_epi32(reinterpret_cast<__m256i>(v), reinterpret_cast<__m256i>(v));
  const __m256i bytes = _mm256_packus_epi16(words, words);  // [v0-3 x4 | v4-7 x4]
  const __m128i joined =
      _mm_unpacklo_epi32(_mm256_castsi256_si128(bytes), _mm256_extracti128_si256(bytes, 1));
  _mm_storel_epi64(reinterpret_cast<__m128i*>(p), joined);
#elif COHORT_REDUCE_VECTOR_BYTES == 16 && defined(__SSE2__)
  const __m128i words = _mm_packs_epi32(reinterpret_cast<__m128i>(v), reinterpret_cast<__m128i>(v));
  store_vector(p, _mm_cvtsi128_si32(_mm_packus_epi16(words, words)));
#else
  store_vector(p, __builtin_convertvector(v, U8));
#endif
}

// ---- Natural-order codecs: kLanes stored elements <-> one F32 vector. -------------------------

template <DType D>
struct Codec;

template <>
struct Codec<DType::Float32> {
  static COHORT_REDUCE_INLINE F32 load(const unsigned char* p) { return load_vector<F32>(p); }
  static COHORT_REDUCE_INLINE void store(unsigned char* p, F32 v) { store_vector(p, v); }
};

template <>
struct Codec<DType::Float16> {
  static COHORT_REDUCE_INLINE F32 load(const unsigned char* p) {
#if defined(__F16C__) && COHORT_REDUCE_VECTOR_BYTES == 64
    // The zero-masking form: GCC 12 warns about the undefined pass-through of the plain one.
    return reinterpret_cast<F32>(_mm512_maskz_cvtph_ps(0xffff, load_vector<__m256i>(p)));
#elif defined(__F16C__) && COHORT_REDUCE_VECTOR_BYTES == 32
    return reinterpret_cast<F32>(_mm256_cvtph_ps(load_vector<__m128i>(p)));
#else
    return half_bits_to_float(widen_u16(p));
#endif
  }
  static COHORT_REDUCE_INLINE void store(unsigned char* p, F32 v) {
#if defined(__F16C__) && (COHORT_REDUCE_VECTOR_BYTES == 64 || COHORT_REDUCE_VECTOR_BYTES == 32)
    store_halves_f16c(p, v);
#else
    narrow_u16(p, float_to_half_bits(v));
#endif
  }
};

template <>
struct Codec<DType::BFloat16> {
  static COHORT_REDUCE_INLINE F32 load(const unsigned char* p) {
    return reinterpret_cast<F32>(widen_u16(p) << 16);
  }
  static COHORT_REDUCE_INLINE void store(unsigned char* p, F32 v) {
    narrow_u16(p, round_to_bf16_high(v) >> 16);
  }
};

template <class Format>
struct Fp8Codec {
  static COHORT_REDUCE_INLINE F32 load(const unsigned char* p) {
    return Format::to_float(widen_u8(p));
  }
  static COHORT_REDUCE_INLINE void store(unsigned char* p, F32 v) {
    narrow_u8(p, Format::from_float(v));
  }
};

template <>
struct Codec<DType::Float8E4M3> : Fp8Codec<E4M3Format> {};
template <>
struct Codec<DType::Float8E5M2> : Fp8Codec<E5M2Format> {};

constexpr std::size_t element_bytes(DType dtype) {
  switch (dtype) {
    case DType::Float64: return 8;
    case DType::Float32: return 4;
    case DType::Float16:
    case DType::BFloat16: return 2;
    default: return 1;
  }
}

template <DType D>
constexpr std::size_t kBlockBytes = element_bytes(D) * kLanes;

// ---- Non-finite detection: all-ones lanes where the exponent field is all ones. -------------

COHORT_REDUCE_INLINE U32 non_finite(F32 v) {
  return reinterpret_cast<U32>((reinterpret_cast<U32>(v) & 0x7f800000u) == 0x7f800000u);
}

COHORT_REDUCE_INLINE U32 non_finite(F64 v) {
  constexpr std::uint64_t kExponent = 0x7ff0000000000000u;
  return reinterpret_cast<U32>((reinterpret_cast<U64>(v) & kExponent) == kExponent);
}

COHORT_REDUCE_INLINE bool any_lane(U32 flags) {
  std::uint32_t any = 0;
  for (std::size_t i = 0; i < kLanes; ++i) any |= flags[i];
  return any != 0;
}

// ---- Blocks in double: elements [0, kLanes/2) in `low`, the rest in `high`. ------------------

struct Wide {
  F64 low, high;
};

// Loads a block as doubles (exactly) and ORs the non-finite lanes of the source into `flags`.
template <DType S>
COHORT_REDUCE_INLINE Wide load_wide(const unsigned char* p, U32& flags) {
  if constexpr (S == DType::Float64) {
    const Wide w{load_vector<F64>(p), load_vector<F64>(p + kBytes)};
    flags |= non_finite(w.low) | non_finite(w.high);
    return w;
  } else {
    const F32 v = Codec<S>::load(p);
    flags |= non_finite(v);
    return {__builtin_convertvector(half_of<0>(v, std::make_index_sequence<kHalfLanes>{}), F64),
            __builtin_convertvector(half_of<kHalfLanes>(v, std::make_index_sequence<kHalfLanes>{}),
                                    F64)};
  }
}

// double -> float rounded to odd: the nearest-even result, stepped one unit toward zero where it
// rounded away (which also brings an overflow to inf back to the largest float), then the last
// mantissa bit set where the conversion was inexact. NaN and inf pass through as NaN and inf.
COHORT_REDUCE_INLINE F32Half narrow_to_odd(F64 d) {
  const F32Half nearest = __builtin_convertvector(d, F32Half);
  const F64 back = __builtin_convertvector(nearest, F64);
  const U64 magnitude = U64{} + 0x7fffffffffffffffu;
  const I64 away = reinterpret_cast<F64>(reinterpret_cast<U64>(back) & magnitude) >
                   reinterpret_cast<F64>(reinterpret_cast<U64>(d) & magnitude);
  const I64 inexact = back != d;
  U32Half bits = reinterpret_cast<U32Half>(nearest);
  bits += reinterpret_cast<U32Half>(__builtin_convertvector(away, I32Half));  // -1 where away
  bits |= reinterpret_cast<U32Half>(__builtin_convertvector(inexact, I32Half)) & 1u;
  return reinterpret_cast<F32Half>(bits);
}

template <DType D>
COHORT_REDUCE_INLINE void store_wide(unsigned char* p, const Wide& w) {
  if constexpr (D == DType::Float64) {
    store_vector(p, w.low);
    store_vector(p + kBytes, w.high);
  } else if constexpr (D == DType::Float32) {
    Codec<D>::store(
        p, join(__builtin_convertvector(w.low, F32Half), __builtin_convertvector(w.high, F32Half)));
  } else {
    Codec<D>::store(p, join(narrow_to_odd(w.low), narrow_to_odd(w.high)));
  }
}

// ---- convert ----------------------------------------------------------------------------------

template <DType S, DType D>
COHORT_REDUCE_INLINE void convert_block(const unsigned char* in, unsigned char* out, float factor,
                                        U32& flags) {
  if constexpr (S == DType::Float64 || D == DType::Float64) {
    Wide w = load_wide<S>(in, flags);
    const double scale = factor;
    w.low *= scale;
    w.high *= scale;
    store_wide<D>(out, w);
  } else {
    const F32 v = Codec<S>::load(in);
    flags |= non_finite(v);
    Codec<D>::store(out, v * factor);
  }
}

template <DType S, DType D>
bool convert_kernel(const void* src, void* dst, std::size_t count, float factor) {
  const auto* in = static_cast<const unsigned char*>(src);
  auto* out = static_cast<unsigned char*>(dst);
  U32 flags{};
  const std::size_t blocks = count / kLanes;
#pragma GCC unroll 4
  for (std::size_t i = 0; i < blocks; ++i)
    convert_block<S, D>(in + i * kBlockBytes<S>, out + i * kBlockBytes<D>, factor, flags);
  const std::size_t rest = count - blocks * kLanes;
  if (rest != 0) {
    alignas(64) unsigned char tail_in[kBlockBytes<S>] = {};
    alignas(64) unsigned char tail_out[kBlockBytes<D>];
    __builtin_memcpy(tail_in, in + blocks * kBlockBytes<S>, rest * element_bytes(S));
    convert_block<S, D>(tail_in, tail_out, factor, flags);
    __builtin_memcpy(out + blocks * kBlockBytes<D>, tail_out, rest * element_bytes(D));
  }
  return any_lane(flags);
}

// ---- norm_part ----------------------------------------------------------------------------------

// The larger of acc and a, NaN kept: a NaN acc fails every comparison and is kept, a NaN a is
// taken.
COHORT_REDUCE_INLINE F64 max_keep_nan(F64 acc, F64 a) {
  return ((a > acc) | (a != a)) ? a : acc;
}

// Adds x² or |x| into `acc`, or takes the larger of acc and |x|.
template <NormPart P>
COHORT_REDUCE_INLINE F64 accumulate(F64 acc, F64 x) {
  if constexpr (P == NormPart::SumSquares) return acc + x * x;
  const F64 a = reinterpret_cast<F64>(reinterpret_cast<U64>(x) & 0x7fffffffffffffffu);
  if constexpr (P == NormPart::SumAbs) return acc + a;
  return max_keep_nan(acc, a);
}

template <DType D, NormPart P>
COHORT_REDUCE_INLINE void norm_block(const unsigned char* p, F64& low, F64& high) {
  U32 unused{};
  const Wide w = load_wide<D>(p, unused);
  low = accumulate<P>(low, w.low);
  high = accumulate<P>(high, w.high);
}

template <DType D, NormPart P>
double norm_kernel(const void* data, std::size_t count) {
  const auto* in = static_cast<const unsigned char*>(data);
  // Two independent accumulators (the block's halves); the sum order is fixed by the ISA.
  F64 low{}, high{};
  const std::size_t blocks = count / kLanes;
#pragma GCC unroll 4
  for (std::size_t i = 0; i < blocks; ++i) norm_block<D, P>(in + i * kBlockBytes<D>, low, high);
  const std::size_t rest = count - blocks * kLanes;
  if (rest != 0) {
    alignas(64) unsigned char tail[kBlockBytes<D>] = {};
    __builtin_memcpy(tail, in + blocks * kBlockBytes<D>, rest * element_bytes(D));
    norm_block<D, P>(tail, low, high);
  }
  const F64 lanes = P == NormPart::MaxAbs ? max_keep_nan(low, high) : low + high;
  double total = 0.0;  // the lanes are non-negative or NaN
  for (std::size_t i = 0; i < kHalfLanes; ++i) {
    const double x = lanes[i];
    if constexpr (P == NormPart::MaxAbs) {
      if ((x > total || x != x) && total == total) total = x;
    } else {
      total += x;
    }
  }
  return total;
}

// ---- clamp ------------------------------------------------------------------------------------

template <class V>
COHORT_REDUCE_INLINE V clamp_lanes(V x, V limit) {
  // Comparisons with NaN are false, so NaN lanes keep x.
  return x > limit ? limit : (x < -limit ? -limit : x);
}

template <DType D>
COHORT_REDUCE_INLINE void clamp_block(unsigned char* p, double limit) {
  if constexpr (D == DType::Float64) {
    const F64 l = F64{} + limit;
    store_vector(p, clamp_lanes(load_vector<F64>(p), l));
    store_vector(p + kBytes, clamp_lanes(load_vector<F64>(p + kBytes), l));
  } else {
    // `limit` is representable in D, so clamping in float and narrowing back is exact.
    Codec<D>::store(p, clamp_lanes(Codec<D>::load(p), F32{} + static_cast<float>(limit)));
  }
}

template <DType D>
void clamp_kernel(void* data, std::size_t count, double limit) {
  auto* p = static_cast<unsigned char*>(data);
  const std::size_t blocks = count / kLanes;
#pragma GCC unroll 4
  for (std::size_t i = 0; i < blocks; ++i) clamp_block<D>(p + i * kBlockBytes<D>, limit);
  const std::size_t rest = count - blocks * kLanes;
  if (rest != 0) {
    alignas(64) unsigned char tail[kBlockBytes<D>] = {};
    __builtin_memcpy(tail, p + blocks * kBlockBytes<D>, rest * element_bytes(D));
    clamp_block<D>(tail, limit);
    __builtin_memcpy(p + blocks * kBlockBytes<D>, tail, rest * element_bytes(D));
  }
}

// ---- The table ---------------------------------------------------------------------------------

template <std::size_t S, std::size_t... D>
constexpr void add_dtype(FloatKernelTable& table, std::index_sequence<D...>) {
  constexpr auto src = static_cast<DType>(S);
  ((table.convert[S][D] = &convert_kernel<src, static_cast<DType>(D)>), ...);
  table.norm[S][static_cast<std::size_t>(NormPart::SumSquares)] =
      &norm_kernel<src, NormPart::SumSquares>;
  table.norm[S][static_cast<std::size_t>(NormPart::SumAbs)] = &norm_kernel<src, NormPart::SumAbs>;
  table.norm[S][static_cast<std::size_t>(NormPart::MaxAbs)] = &norm_kernel<src, NormPart::MaxAbs>;
  table.clamp[S] = &clamp_kernel<src>;
}

template <std::size_t... S>
constexpr FloatKernelTable make_table(std::index_sequence<S...> dtypes) {
  FloatKernelTable table{};
  (add_dtype<S>(table, dtypes), ...);
  return table;
}

constexpr FloatKernelTable make_float_kernel_table() {
  return make_table(std::make_index_sequence<kFloatDTypeCount>{});
}

}  // namespace
}  // namespace cohort::train::kernels::COHORT_REDUCE_ISA_NAMESPACE
