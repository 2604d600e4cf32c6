#pragma once

// The reduction loops and the kernel table of one instruction set; see vector_codecs.hpp for
// how this header is compiled once per ISA. Every element, tail included, goes through the same
// vector code: the last partial block is copied into zero-padded stack buffers, combined there
// and copied back, so the result never depends on where a block boundary falls.

#include "reduce/dispatch.hpp"
#include "reduce/vector_codecs.hpp"

#include <initializer_list>

#if defined(__SSE2__)
#include <immintrin.h>  // non-temporal stores; inline intrinsics only, never out-of-line code
#endif

namespace cohort::reduce::COHORT_REDUCE_ISA_NAMESPACE {
namespace {

template <class C>
using Compute = typename C::Compute;

struct SumOp {
  template <class C>
  static COHORT_REDUCE_INLINE Compute<C> apply(Compute<C> x, Compute<C> y) {
    if constexpr (C::kFloating) {
      return x + y;
    } else {  // unsigned arithmetic wraps instead of overflowing
      using U = typename C::Unsigned;
      return reinterpret_cast<Compute<C>>(reinterpret_cast<U>(x) + reinterpret_cast<U>(y));
    }
  }
};

struct ProdOp {
  template <class C>
  static COHORT_REDUCE_INLINE Compute<C> apply(Compute<C> x, Compute<C> y) {
    if constexpr (C::kFloating) {
      return x * y;
    } else {
      using U = typename C::Unsigned;
      return reinterpret_cast<Compute<C>>(reinterpret_cast<U>(x) * reinterpret_cast<U>(y));
    }
  }
};

// Min and Max keep x unless y is strictly better or y is NaN; a NaN x is kept because every
// comparison with it is false. So NaN in either operand gives NaN, and ties (+0 vs -0) keep x.
// (The hardware min/max instructions return the second operand when either is NaN, which is
// why they are not used.)
struct MinOp {
  template <class C>
  static COHORT_REDUCE_INLINE Compute<C> apply(Compute<C> x, Compute<C> y) {
    if constexpr (C::kFloating)
      return ((y < x) | (y != y)) ? y : x;
    else
      return y < x ? y : x;
  }
};

struct MaxOp {
  template <class C>
  static COHORT_REDUCE_INLINE Compute<C> apply(Compute<C> x, Compute<C> y) {
    if constexpr (C::kFloating)
      return ((y > x) | (y != y)) ? y : x;
    else
      return y > x ? y : x;
  }
};

struct AndOp {
  template <class C>
  static COHORT_REDUCE_INLINE Compute<C> apply(Compute<C> x, Compute<C> y) {
    return x & y;
  }
};

struct OrOp {
  template <class C>
  static COHORT_REDUCE_INLINE Compute<C> apply(Compute<C> x, Compute<C> y) {
    return x | y;
  }
};

struct XorOp {
  template <class C>
  static COHORT_REDUCE_INLINE Compute<C> apply(Compute<C> x, Compute<C> y) {
    return x ^ y;
  }
};

template <class C>
constexpr std::size_t kBlockBytes = C::kLanes * sizeof(typename C::Storage);

template <class C, class Op>
COHORT_REDUCE_INLINE void combine_block(unsigned char* out, const unsigned char* x,
                                        const unsigned char* y) {
  // Both operands are read before dst is written, so dst may be x or y.
  Compute<C> vx[C::kParts], vy[C::kParts];
  C::load(x, vx);
  C::load(y, vy);
  for (int k = 0; k < C::kParts; ++k) vx[k] = Op::template apply<C>(vx[k], vy[k]);
  C::store(out, vx);
}

template <class C, class Op>
void binary_kernel(void* dst, const void* a, const void* b, std::size_t count) {
  constexpr std::size_t kStep = kBlockBytes<C>;
  auto* out = static_cast<unsigned char*>(dst);
  const auto* x = static_cast<const unsigned char*>(a);
  const auto* y = static_cast<const unsigned char*>(b);
  const std::size_t blocks = count / C::kLanes;
#pragma GCC unroll 4
  for (std::size_t i = 0; i < blocks; ++i)
    combine_block<C, Op>(out + i * kStep, x + i * kStep, y + i * kStep);
  const std::size_t tail_bytes = (count - blocks * C::kLanes) * sizeof(typename C::Storage);
  if (tail_bytes != 0) {
    alignas(64) unsigned char ta[kStep] = {};
    alignas(64) unsigned char tb[kStep] = {};
    alignas(64) unsigned char tr[kStep];
    const std::size_t done = blocks * kStep;
    __builtin_memcpy(ta, x + done, tail_bytes);
    __builtin_memcpy(tb, y + done, tail_bytes);
    combine_block<C, Op>(tr, ta, tb);
    __builtin_memcpy(out + done, tr, tail_bytes);
  }
}

// fold_kernel: every input folded into each output in one pass. Per block, the inputs are
// combined into a block on the stack (which stays in registers or L1) by the same combine_block
// calls, in the same order, that reduce_to followed by reduce_into would make, so the bits are
// theirs; then the block (or, streamed into several outputs, a line of blocks) is stored into
// every output. Every input's bytes are read before any output's same bytes are written, so an
// output may be one of the inputs.

/// Where non-temporal stores start: output 0 is brought to this alignment first, so its blocks
/// after that (and those of every output aligned like it) suit the widest store.
constexpr std::size_t kStreamAlignment = 64;

/// The widest non-temporal store this ISA has that divides a block of kStep bytes; 0 for none.
template <std::size_t kStep>
constexpr std::size_t stream_width() {
#if defined(__AVX512F__)
  if (kStep % 64 == 0) return 64;
#endif
#if defined(__AVX__)
  if (kStep % 32 == 0) return 32;
#endif
#if defined(__SSE2__)
  if (kStep % 16 == 0) return 16;
#endif
  return 0;
}

/// Stores one block into `dst`, aligned to stream_width<kStep>() (not 0), past the cache.
template <std::size_t kStep>
COHORT_REDUCE_INLINE void stream_block(unsigned char* dst, const unsigned char* block) {
  constexpr std::size_t kWidth = stream_width<kStep>();
  static_assert(kWidth != 0);
#if defined(__AVX512F__)
  if constexpr (kWidth == 64) {
    for (std::size_t b = 0; b < kStep; b += 64)
      _mm512_stream_si512(reinterpret_cast<__m512i*>(dst + b),
                          _mm512_load_si512(reinterpret_cast<const __m512i*>(block + b)));
    return;
  }
#endif
#if defined(__AVX__)
  if constexpr (kWidth == 32) {
    for (std::size_t b = 0; b < kStep; b += 32)
      _mm256_stream_si256(reinterpret_cast<__m256i*>(dst + b),
                          _mm256_load_si256(reinterpret_cast<const __m256i*>(block + b)));
    return;
  }
#endif
#if defined(__SSE2__)
  if constexpr (kWidth == 16) {
    for (std::size_t b = 0; b < kStep; b += 16)
      _mm_stream_si128(reinterpret_cast<__m128i*>(dst + b),
                       _mm_load_si128(reinterpret_cast<const __m128i*>(block + b)));
  }
#endif
}

/// Orders the non-temporal stores before any later store (a flag a peer reads).
COHORT_REDUCE_INLINE void fence_streams() {
#if defined(__SSE2__)
  _mm_sfence();
#endif
}

// Not std::min: nothing here may be an out-of-line function (see vector_codecs.hpp).
COHORT_REDUCE_INLINE std::size_t smaller(std::size_t a, std::size_t b) {
  return a < b ? a : b;
}

COHORT_REDUCE_INLINE const unsigned char* byte_at(const void* base, std::size_t at) {
  return static_cast<const unsigned char*>(base) + at;
}

COHORT_REDUCE_INLINE unsigned char* byte_at(void* base, std::size_t at) {
  return static_cast<unsigned char*>(base) + at;
}

/// Bytes [at, at + length) of every output, length at most one block: through zero-padded copies
/// on the stack, as binary_kernel's tail.
template <class C, class Op>
void fold_part(void* const* outputs, std::size_t n_outputs, const void* const* inputs,
               std::size_t n_inputs, std::size_t at, std::size_t length) {
  constexpr std::size_t kStep = kBlockBytes<C>;
  alignas(64) unsigned char sum[kStep] = {};
  alignas(64) unsigned char operand[kStep] = {};
  __builtin_memcpy(sum, byte_at(inputs[0], at), length);
  for (std::size_t r = 1; r < n_inputs; ++r) {
    __builtin_memcpy(operand, byte_at(inputs[r], at), length);
    combine_block<C, Op>(sum, sum, operand);
  }
  for (std::size_t j = 0; j < n_outputs; ++j)
    __builtin_memcpy(byte_at(outputs[j], at), sum, length);
}

/// The whole blocks from `at` on. kStream: stored past the cache, every output aligned to
/// kStreamAlignment at `at`; kLines: each output gets a whole line of them at a time (one
/// output's blocks fill its lines in turn anyway). Returns where the blocks end.
///
/// Why whole lines: a core combines non-temporal stores to one line in a write-combining
/// buffer, of which it has about ten. Blocks narrower than a line (32 bytes on AVX2, 16 on
/// SSE2, 32 for f16 on AVX-512 too) stored to n outputs in turn keep n lines half-written; past
/// the buffers' number each is flushed as a partial write (cohort-reduce-bench --fan-out
/// --all-isas on an AVX-512 Xeon, its AVX2 kernels, f32, 16 MiB into 8 outputs: 3.7 GB/s, into
/// 12-32: 0.5, against 7-13 cached; a line at a time, 26 and 14-18, as its AVX-512 kernels).
template <class C, class Op, bool kStream, bool kLines = false>
std::size_t fold_blocks(void* const* outputs, std::size_t n_outputs, const void* const* inputs,
                        std::size_t n_inputs, std::size_t at, std::size_t total) {
  constexpr std::size_t kStep = kBlockBytes<C>;
  constexpr std::size_t kSpan = kLines && kStep < kStreamAlignment ? kStreamAlignment : kStep;
  static_assert(kSpan % kStep == 0);
  // In locals, not read through the arrays: a store through a byte pointer may alias an array.
  const void* const first = inputs[0];
  const void* const second = inputs[1];
  for (; total - at >= kSpan; at += kSpan) {
    alignas(64) unsigned char sum[kSpan];
    for (std::size_t b = 0; b < kSpan; b += kStep) {
      combine_block<C, Op>(sum + b, byte_at(first, at + b), byte_at(second, at + b));
      for (std::size_t r = 2; r < n_inputs; ++r)
        combine_block<C, Op>(sum + b, sum + b, byte_at(inputs[r], at + b));
    }
    for (std::size_t j = 0; j < n_outputs; ++j) {
      if constexpr (kStream) {
        // Block by block, as the combine stored them: a wider load of the sum would have to
        // wait for both of a narrow codec's stores (a failed store forwarding).
        for (std::size_t b = 0; b < kSpan; b += kStep)
          stream_block<kStep>(byte_at(outputs[j], at + b), sum + b);
      } else
        __builtin_memcpy(byte_at(outputs[j], at), sum, kSpan);
    }
  }
  return at;
}

template <class C, class Op>
void fold_kernel(void* const* outputs, std::size_t n_outputs, const void* const* inputs,
                 std::size_t n_inputs, std::size_t count, bool stream) {
  constexpr std::size_t kStep = kBlockBytes<C>;
  constexpr std::size_t kSize = sizeof(typename C::Storage);
  constexpr std::size_t kWidth = stream_width<kStep>();
  const std::size_t total = count * kSize;
  std::size_t at = 0;
  if (stream && kWidth != 0) {
    // Up to output 0's next aligned byte, where an element boundary falls on it.
    const std::size_t misaligned = reinterpret_cast<std::uintptr_t>(outputs[0]) % kStreamAlignment;
    if (misaligned != 0 && (kStreamAlignment - misaligned) % kSize == 0) {
      const std::size_t head = smaller(total, kStreamAlignment - misaligned);
      for (std::size_t length = 0; at < head; at += length) {
        length = smaller(kStep, head - at);
        fold_part<C, Op>(outputs, n_outputs, inputs, n_inputs, at, length);
      }
    }
    // Streamed only if every output is at a line boundary here: each then gets whole lines.
    for (std::size_t j = 0; j < n_outputs && stream; ++j)
      stream = (reinterpret_cast<std::uintptr_t>(outputs[j]) + at) % kStreamAlignment == 0;
  } else {
    stream = false;
  }
  if constexpr (kWidth != 0) {
    if (stream) {
      at = n_outputs == 1
               ? fold_blocks<C, Op, true>(outputs, n_outputs, inputs, n_inputs, at, total)
               : fold_blocks<C, Op, true, true>(outputs, n_outputs, inputs, n_inputs, at, total);
      fence_streams();
    }
  }
  at = fold_blocks<C, Op, false>(outputs, n_outputs, inputs, n_inputs, at, total);
  if (at < total) fold_part<C, Op>(outputs, n_outputs, inputs, n_inputs, at, total - at);
}

template <class C>
COHORT_REDUCE_INLINE void divide_block(unsigned char* p, Compute<C> divisor) {
  Compute<C> v[C::kParts];
  C::load(p, v);
  for (int k = 0; k < C::kParts; ++k) v[k] = v[k] / divisor;
  C::store(p, v);
}

template <class C>
void divide_kernel(void* data, std::size_t count, std::size_t divisor) {
  constexpr std::size_t kStep = kBlockBytes<C>;
  auto* p = static_cast<unsigned char*>(data);
  const Compute<C> d = Compute<C>{} + static_cast<typename C::Scalar>(divisor);
  const std::size_t blocks = count / C::kLanes;
  for (std::size_t i = 0; i < blocks; ++i) divide_block<C>(p + i * kStep, d);
  const std::size_t tail_bytes = (count - blocks * C::kLanes) * sizeof(typename C::Storage);
  if (tail_bytes != 0) {
    alignas(64) unsigned char t[kStep] = {};
    __builtin_memcpy(t, p + blocks * kStep, tail_bytes);
    divide_block<C>(t, d);
    __builtin_memcpy(p + blocks * kStep, t, tail_bytes);
  }
}

// Truncating division of integers by a size_t, exact for every value and divisor (vector
// hardware has no integer division, so this stays scalar).
template <class T>
void integer_divide_kernel(void* data, std::size_t count, std::size_t divisor) {
  auto* p = static_cast<unsigned char*>(data);
  for (std::size_t i = 0; i < count; ++i) {
    T value;
    __builtin_memcpy(&value, p + i * sizeof(T), sizeof(T));
    if constexpr (std::is_unsigned_v<T>) {
      value = static_cast<T>(static_cast<std::uint64_t>(value) / divisor);
    } else if (divisor <= static_cast<std::size_t>(INT64_MAX)) {
      value = static_cast<T>(static_cast<std::int64_t>(value) / static_cast<std::int64_t>(divisor));
    } else {  // |value| <= 2^63 <= divisor: only INT64_MIN / 2^63 is not 0
      value = (sizeof(T) == 8 && static_cast<std::int64_t>(value) == INT64_MIN &&
               divisor == static_cast<std::size_t>(1) << 63)
                  ? static_cast<T>(-1)
                  : T{0};
    }
    __builtin_memcpy(p + i * sizeof(T), &value, sizeof(T));
  }
}

// The codec conversions in element order (a codec may hold elements interleaved across its
// parts: element j * kParts + k is lane j of part k). Test hooks, not tuned for speed.
template <class C>
void widen_kernel(float* dst, const void* src, std::size_t count) {
  constexpr std::size_t kStep = kBlockBytes<C>;
  const auto* in = static_cast<const unsigned char*>(src);
  for (std::size_t first = 0; first < count; first += C::kLanes) {
    alignas(64) unsigned char block[kStep] = {};
    const std::size_t n = count - first < C::kLanes ? count - first : C::kLanes;
    __builtin_memcpy(block, in + first * sizeof(typename C::Storage),
                     n * sizeof(typename C::Storage));
    F32 v[C::kParts];
    C::load(block, v);
    for (std::size_t e = 0; e < n; ++e) dst[first + e] = v[e % C::kParts][e / C::kParts];
  }
}

template <class C>
void narrow_kernel(void* dst, const float* src, std::size_t count) {
  constexpr std::size_t kStep = kBlockBytes<C>;
  auto* out = static_cast<unsigned char*>(dst);
  for (std::size_t first = 0; first < count; first += C::kLanes) {
    const std::size_t n = count - first < C::kLanes ? count - first : C::kLanes;
    F32 v[C::kParts] = {};
    for (std::size_t e = 0; e < n; ++e) v[e % C::kParts][e / C::kParts] = src[first + e];
    alignas(64) unsigned char block[kStep];
    C::store(block, v);
    __builtin_memcpy(out + first * sizeof(typename C::Storage), block,
                     n * sizeof(typename C::Storage));
  }
}

constexpr std::size_t slot(ReduceOp op) {
  return static_cast<std::size_t>(op);
}
constexpr std::size_t slot(DType dtype) {
  return static_cast<std::size_t>(dtype);
}

/// The kernels of one op on one dtype: the two-operand form and the fold.
template <class C, class Op>
constexpr void add_op(KernelTable& table, ReduceOp op, DType dtype) {
  table.binary[slot(op)][slot(dtype)] = &binary_kernel<C, Op>;
  table.fold[slot(op)][slot(dtype)] = &fold_kernel<C, Op>;
}

// Sum, Prod, Min, Max and Avg (whose combining step is Sum) plus the Avg division.
template <class C>
constexpr void add_arithmetic(KernelTable& table, DType dtype) {
  add_op<C, SumOp>(table, ReduceOp::Sum, dtype);
  add_op<C, SumOp>(table, ReduceOp::Avg, dtype);
  add_op<C, ProdOp>(table, ReduceOp::Prod, dtype);
  add_op<C, MinOp>(table, ReduceOp::Min, dtype);
  add_op<C, MaxOp>(table, ReduceOp::Max, dtype);
  if constexpr (C::kFloating) table.divide[slot(dtype)] = &divide_kernel<C>;
}

template <class C>
constexpr void add_narrow_float(KernelTable& table, DType dtype) {
  add_arithmetic<C>(table, dtype);
  table.widen[slot(dtype)] = &widen_kernel<C>;
  table.narrow[slot(dtype)] = &narrow_kernel<C>;
}

template <class T>
constexpr void add_integer(KernelTable& table, DType dtype) {
  add_arithmetic<Plain<T>>(table, dtype);
  table.divide[slot(dtype)] = &integer_divide_kernel<T>;
  add_op<Plain<T>, AndOp>(table, ReduceOp::BAnd, dtype);
  add_op<Plain<T>, OrOp>(table, ReduceOp::BOr, dtype);
  add_op<Plain<T>, XorOp>(table, ReduceOp::BXor, dtype);
}

// On Bool, Sum/Max/BOr are "or" and Prod/Min/BAnd are "and"; Avg is undefined.
constexpr void add_bool(KernelTable& table) {
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Max, ReduceOp::BOr})
    add_op<BoolCodec, OrOp>(table, op, DType::Bool);
  for (ReduceOp op : {ReduceOp::Prod, ReduceOp::Min, ReduceOp::BAnd})
    add_op<BoolCodec, AndOp>(table, op, DType::Bool);
  add_op<BoolCodec, XorOp>(table, ReduceOp::BXor, DType::Bool);
}

constexpr KernelTable make_kernel_table() {
  KernelTable table{};
  add_arithmetic<Plain<float>>(table, DType::Float32);
  add_arithmetic<Plain<double>>(table, DType::Float64);
  add_narrow_float<HalfCodec>(table, DType::Float16);
  add_narrow_float<Bf16Codec>(table, DType::BFloat16);
  add_narrow_float<E4M3Codec>(table, DType::Float8E4M3);
  add_narrow_float<E5M2Codec>(table, DType::Float8E5M2);
  add_integer<std::int8_t>(table, DType::Int8);
  add_integer<std::uint8_t>(table, DType::UInt8);
  add_integer<std::int16_t>(table, DType::Int16);
  add_integer<std::int32_t>(table, DType::Int32);
  add_integer<std::int64_t>(table, DType::Int64);
  add_integer<std::uint32_t>(table, DType::UInt32);
  add_integer<std::uint64_t>(table, DType::UInt64);
  add_bool(table);
  return table;
}

}  // namespace
}  // namespace cohort::reduce::COHORT_REDUCE_ISA_NAMESPACE
