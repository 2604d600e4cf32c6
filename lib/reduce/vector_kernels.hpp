#pragma once

// The reduction loops and the kernel table of one instruction set; see vector_codecs.hpp for
// how this header is compiled once per ISA. Every element, tail included, goes through the same
// vector code: the last partial block is copied into zero-padded stack buffers, combined there
// and copied back, so the result never depends on where a block boundary falls.

#include "reduce/dispatch.hpp"
#include "reduce/vector_codecs.hpp"

#include <initializer_list>

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

// Sum, Prod, Min, Max and Avg (whose combining step is Sum) plus the Avg division.
template <class C>
constexpr void add_arithmetic(KernelTable& table, DType dtype) {
  table.binary[slot(ReduceOp::Sum)][slot(dtype)] = &binary_kernel<C, SumOp>;
  table.binary[slot(ReduceOp::Avg)][slot(dtype)] = &binary_kernel<C, SumOp>;
  table.binary[slot(ReduceOp::Prod)][slot(dtype)] = &binary_kernel<C, ProdOp>;
  table.binary[slot(ReduceOp::Min)][slot(dtype)] = &binary_kernel<C, MinOp>;
  table.binary[slot(ReduceOp::Max)][slot(dtype)] = &binary_kernel<C, MaxOp>;
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
  table.binary[slot(ReduceOp::BAnd)][slot(dtype)] = &binary_kernel<Plain<T>, AndOp>;
  table.binary[slot(ReduceOp::BOr)][slot(dtype)] = &binary_kernel<Plain<T>, OrOp>;
  table.binary[slot(ReduceOp::BXor)][slot(dtype)] = &binary_kernel<Plain<T>, XorOp>;
}

// On Bool, Sum/Max/BOr are "or" and Prod/Min/BAnd are "and"; Avg is undefined.
constexpr void add_bool(KernelTable& table) {
  const std::size_t b = slot(DType::Bool);
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Max, ReduceOp::BOr})
    table.binary[slot(op)][b] = &binary_kernel<BoolCodec, OrOp>;
  for (ReduceOp op : {ReduceOp::Prod, ReduceOp::Min, ReduceOp::BAnd})
    table.binary[slot(op)][b] = &binary_kernel<BoolCodec, AndOp>;
  table.binary[slot(ReduceOp::BXor)][b] = &binary_kernel<BoolCodec, XorOp>;
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
