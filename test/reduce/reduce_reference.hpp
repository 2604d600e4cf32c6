#pragma once

// Scalar reference semantics for the reduction kernel tests, written independently of
// lib/reduce: one element at a time, plain C++ arithmetic, with the narrow floats converted by
// lib/core/float_formats.hpp (the documented reference conversions). Also random test data
// that mixes ordinary values with NaN, infinities, signed zeros and subnormals.

#include <cohort/dtype.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "core/float_formats.hpp"
#include "reduce/dispatch.hpp"

namespace cohort::reduce::testing {

inline std::vector<Isa> available_isas() {
  std::vector<Isa> isas;
  for (Isa isa : {Isa::Portable, Isa::Avx2, Isa::Avx512})
    if (isa_available(isa)) isas.push_back(isa);
  return isas;
}

/// The kernel table of `isa` (which must be available).
inline const KernelTable& kernels_of(Isa isa) {
#if COHORT_REDUCE_X86
  if (isa == Isa::Avx512) return kAvx512Kernels;
  if (isa == Isa::Avx2) return kAvx2Kernels;
#endif
  (void)isa;
  return kPortableKernels;
}

template <class T>
T read_element(const unsigned char* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

template <class T>
void write_element(unsigned char* p, T v) {
  std::memcpy(p, &v, sizeof v);
}

template <class F>
F reference_float_op(ReduceOp op, F x, F y) {
  const F nan = std::numeric_limits<F>::quiet_NaN();
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg: return x + y;
    case ReduceOp::Prod: return x * y;
    case ReduceOp::Min:
      if (std::isnan(x) || std::isnan(y)) return nan;
      return y < x ? y : x;  // a tie (+0 vs -0) keeps the first operand
    case ReduceOp::Max:
      if (std::isnan(x) || std::isnan(y)) return nan;
      return y > x ? y : x;
    default: break;
  }
  throw std::logic_error("float reference asked for a bitwise op");
}

template <class T>
T reference_integer_op(ReduceOp op, T x, T y) {
  using U = std::make_unsigned_t<T>;
  const U ux = static_cast<U>(x), uy = static_cast<U>(y);
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg: return static_cast<T>(static_cast<U>(ux + uy));
    // Promote past int so the unsigned product of two 16-bit values cannot overflow int.
    case ReduceOp::Prod: return static_cast<T>(static_cast<U>(static_cast<std::uint64_t>(ux) * uy));
    case ReduceOp::Min: return x < y ? x : y;
    case ReduceOp::Max: return x > y ? x : y;
    case ReduceOp::BAnd: return static_cast<T>(ux & uy);
    case ReduceOp::BOr: return static_cast<T>(ux | uy);
    case ReduceOp::BXor: return static_cast<T>(ux ^ uy);
  }
  return T{};
}

inline bool reference_bool_op(ReduceOp op, bool x, bool y) {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Max:
    case ReduceOp::BOr: return x || y;
    case ReduceOp::Prod:
    case ReduceOp::Min:
    case ReduceOp::BAnd: return x && y;
    case ReduceOp::BXor: return x != y;
    case ReduceOp::Avg: break;
  }
  throw std::logic_error("bool reference asked for avg");
}

/// Narrow-float codec by dtype, from lib/core/float_formats.hpp.
inline float narrow_to_float(DType dtype, const unsigned char* p) {
  switch (dtype) {
    case DType::Float16: return fp::half_to_float(read_element<std::uint16_t>(p));
    case DType::BFloat16: return fp::bf16_to_float(read_element<std::uint16_t>(p));
    case DType::Float8E4M3: return fp::e4m3_to_float(*p);
    case DType::Float8E5M2: return fp::e5m2_to_float(*p);
    default: throw std::logic_error("not a narrow float");
  }
}

inline void float_to_narrow(DType dtype, float v, unsigned char* p) {
  switch (dtype) {
    case DType::Float16: return write_element(p, fp::float_to_half(v));
    case DType::BFloat16: return write_element(p, fp::float_to_bf16(v));
    case DType::Float8E4M3: *p = fp::float_to_e4m3(v); return;
    case DType::Float8E5M2: *p = fp::float_to_e5m2(v); return;
    default: throw std::logic_error("not a narrow float");
  }
}

/// out = x op y for one element of `dtype`.
inline void reference_element(ReduceOp op, DType dtype, const unsigned char* x,
                              const unsigned char* y, unsigned char* out) {
  switch (dtype) {
    case DType::Float32:
      return write_element(out,
                           reference_float_op(op, read_element<float>(x), read_element<float>(y)));
    case DType::Float64:
      return write_element(
          out, reference_float_op(op, read_element<double>(x), read_element<double>(y)));
    case DType::Float16:
    case DType::BFloat16:
    case DType::Float8E4M3:
    case DType::Float8E5M2:
      return float_to_narrow(
          dtype, reference_float_op(op, narrow_to_float(dtype, x), narrow_to_float(dtype, y)), out);
#define COHORT_TEST_INT_CASE(D, T) \
  case DType::D:                   \
    return write_element(out, reference_integer_op(op, read_element<T>(x), read_element<T>(y)));
      COHORT_TEST_INT_CASE(Int8, std::int8_t)
      COHORT_TEST_INT_CASE(UInt8, std::uint8_t)
      COHORT_TEST_INT_CASE(Int16, std::int16_t)
      COHORT_TEST_INT_CASE(Int32, std::int32_t)
      COHORT_TEST_INT_CASE(Int64, std::int64_t)
      COHORT_TEST_INT_CASE(UInt32, std::uint32_t)
      COHORT_TEST_INT_CASE(UInt64, std::uint64_t)
#undef COHORT_TEST_INT_CASE
    case DType::Bool: *out = reference_bool_op(op, *x != 0, *y != 0) ? 1 : 0; return;
  }
}

/// Whether the element at p is a NaN of `dtype` (false for non-float dtypes).
inline bool is_nan_element(DType dtype, const unsigned char* p) {
  switch (dtype) {
    case DType::Float32: return std::isnan(read_element<float>(p));
    case DType::Float64: return std::isnan(read_element<double>(p));
    case DType::Float16: return (read_element<std::uint16_t>(p) & 0x7fffu) > 0x7c00u;
    case DType::BFloat16: return (read_element<std::uint16_t>(p) & 0x7fffu) > 0x7f80u;
    case DType::Float8E4M3: return (*p & 0x7fu) == 0x7fu;
    case DType::Float8E5M2: return (*p & 0x7fu) > 0x7cu;
    default: return false;
  }
}

/// Bytes of guard on each side of a buffer under test, and their value: a kernel that writes
/// outside its range changes them.
inline constexpr std::size_t kGuard = 64;
inline constexpr unsigned char kGuardByte = 0xa5;

/// Bit-for-bit equality, except that any NaN equals any NaN.
inline bool same_element(DType dtype, const unsigned char* x, const unsigned char* y) {
  if (is_nan_element(dtype, x) && is_nan_element(dtype, y)) return true;
  return std::memcmp(x, y, dtype_size(dtype)) == 0;
}

inline std::string hex_element(DType dtype, const unsigned char* p) {
  static const char kDigits[] = "0123456789abcdef";
  std::string s = "0x";
  for (std::size_t i = dtype_size(dtype); i-- > 0;) {  // little-endian: print high byte first
    s += kDigits[p[i] >> 4];
    s += kDigits[p[i] & 15];
  }
  return s;
}

template <class F, class Bits>
F random_wide_float(std::mt19937_64& rng) {
  std::uniform_int_distribution<int> category(0, 9);
  std::uniform_real_distribution<F> ordinary(F(-1000), F(1000));
  using Limits = std::numeric_limits<F>;
  const F specials[] = {Limits::quiet_NaN(),
                        -Limits::quiet_NaN(),
                        Limits::infinity(),
                        -Limits::infinity(),
                        F(0),
                        F(-0.0),
                        Limits::max(),
                        -Limits::max(),
                        Limits::min(),
                        Limits::denorm_min(),
                        -Limits::denorm_min(),
                        F(1)};
  constexpr Bits kExponentMask =
      Limits::max_exponent == 128 ? Bits(0x7f800000u) : Bits(0x7ff0000000000000ull);
  const int c = category(rng);
  if (c < 5) return ordinary(rng);
  if (c < 7) return std::bit_cast<F>(static_cast<Bits>(rng()));                   // any bit pattern
  if (c < 9) return std::bit_cast<F>(static_cast<Bits>(rng()) & ~kExponentMask);  // subnormal
  return specials[rng() % std::size(specials)];
}

/// `count` random elements of `dtype`. Narrow floats and integers use every bit pattern; f32
/// and f64 mix ordinary values (so sums round), arbitrary bits, subnormals and specials. Bool
/// includes non-canonical true bytes.
inline std::vector<unsigned char> random_elements(DType dtype, std::size_t count,
                                                  std::mt19937_64& rng) {
  const std::size_t size = dtype_size(dtype);
  std::vector<unsigned char> data(count * size);
  for (std::size_t i = 0; i < count; ++i) {
    unsigned char* p = data.data() + i * size;
    if (dtype == DType::Float32) {
      write_element(p, random_wide_float<float, std::uint32_t>(rng));
    } else if (dtype == DType::Float64) {
      write_element(p, random_wide_float<double, std::uint64_t>(rng));
    } else if (dtype == DType::Bool) {
      const auto r = rng() % 8;
      *p = r < 4 ? 0 : r < 7 ? 1 : static_cast<unsigned char>(2 + rng() % 254);
    } else {
      const std::uint64_t bits = rng();
      std::memcpy(p, &bits, size);
    }
  }
  return data;
}

}  // namespace cohort::reduce::testing
