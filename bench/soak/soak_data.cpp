#include "soak_data.hpp"

#include "element_codec.hpp"
#include "soak_random.hpp"

#include <cmath>
#include <cstring>
#include <iomanip>
#include <sstream>
#include <stdexcept>
#include <type_traits>

namespace cohort::soak {
namespace {

// Domain tags, so the hashes of different uses of the same coordinates are unrelated.
constexpr std::uint64_t kSourceBits = 1;

std::uint64_t element_hash(const DataSource& s, std::uint64_t domain, std::uint64_t rank,
                           std::size_t i) {
  return hash_words({s.seed, s.op_index, domain, rank, static_cast<std::uint64_t>(i)});
}

// See the header: below this every integer is exactly representable (capped for f32 and f64).
double exact_integer_limit(DType dtype) {
  switch (dtype) {
    case DType::Float8E5M2: return 8;
    case DType::Float8E4M3: return 16;
    case DType::BFloat16: return 256;
    case DType::Float16: return 2048;
    default: return 1 << 20;
  }
}

// Largest power-of-two exponent the format holds.
int max_exponent(DType dtype) {
  switch (dtype) {
    case DType::Float8E4M3: return 8;
    case DType::Float8E5M2:
    case DType::Float16: return 15;
    case DType::Float64: return 1023;
    default: return 127;
  }
}

// A value in [-bound, bound] from a hash.
double signed_below(std::uint64_t h, double bound) {
  const auto span = static_cast<std::uint64_t>(2 * bound + 1);
  return static_cast<double>(h % span) - bound;
}

// Rank `rank`'s float contribution to Sum, Avg or Prod at element i.
double arithmetic_contribution(const DataSource& s, int rank, std::size_t i) {
  const double n = s.group_size;
  const double limit = exact_integer_limit(s.dtype);
  const std::uint64_t h = element_hash(s, kSourceBits, static_cast<std::uint64_t>(rank), i);
  switch (s.op) {
    case ReduceOp::Sum: return signed_below(h, std::floor(limit / n));
    case ReduceOp::Prod: {
      if (s.group_size > max_exponent(s.dtype)) return (h & 1) ? 1.0 : -1.0;
      constexpr double kFactors[] = {-2.0, -1.0, 1.0, 2.0};
      return kFactors[h % 4];
    }
    case ReduceOp::Avg: return n * signed_below(h, std::floor(limit / n));
    default: break;
  }
  throw std::logic_error("soak: arithmetic_contribution for a non-arithmetic op");
}

// Writes the low `bytes` bytes of `bits` (little-endian host) as element i.
void store_bits(void* out, std::size_t i, std::size_t bytes, std::uint64_t bits) {
  std::memcpy(static_cast<std::uint8_t*>(out) + i * bytes, &bits, bytes);
}

void fill_float_ordering_contribution(const DataSource& s, int rank, std::size_t first,
                                      std::size_t count, void* out) {
  const std::size_t es = dtype_size(s.dtype);
  for (std::size_t k = 0; k < count; ++k) {
    store_bits(out, k, es,
               element_hash(s, kSourceBits, static_cast<std::uint64_t>(rank), first + k));
    if (load_element(s.dtype, out, k) == 0) store_bits(out, k, es, 0);  // -0 becomes +0
  }
}

template <class T>
T combine(ReduceOp op, T a, T b) {
  using U = std::make_unsigned_t<T>;
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg:
      return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
    case ReduceOp::Prod:
      // Through unsigned long long, so the product wraps instead of overflowing int.
      return static_cast<T>(static_cast<U>(static_cast<unsigned long long>(static_cast<U>(a)) *
                                           static_cast<unsigned long long>(static_cast<U>(b))));
    case ReduceOp::Min: return b < a ? b : a;
    case ReduceOp::Max: return b > a ? b : a;
    case ReduceOp::BAnd: return static_cast<T>(a & b);
    case ReduceOp::BOr: return static_cast<T>(a | b);
    case ReduceOp::BXor: return static_cast<T>(a ^ b);
  }
  return a;
}

template <class T>
void reduce_integers(const DataSource& s, std::size_t first, std::size_t count, void* out) {
  for (std::size_t k = 0; k < count; ++k) {
    T acc{};
    for (int r = 0; r < s.group_size; ++r) {
      const auto v =
          static_cast<T>(element_hash(s, kSourceBits, static_cast<std::uint64_t>(r), first + k));
      acc = r == 0 ? v : combine<T>(s.op, acc, v);
    }
    if (s.op == ReduceOp::Avg) acc = static_cast<T>(acc / static_cast<T>(s.group_size));
    std::memcpy(static_cast<std::uint8_t*>(out) + k * sizeof(T), &acc, sizeof(T));
  }
}

void reduce_bools(const DataSource& s, std::size_t first, std::size_t count, void* out) {
  // Sum, Max and BOr are "or"; Prod, Min and BAnd are "and"; BXor is parity.
  const bool is_and = s.op == ReduceOp::Prod || s.op == ReduceOp::Min || s.op == ReduceOp::BAnd;
  for (std::size_t k = 0; k < count; ++k) {
    bool acc = is_and;
    for (int r = 0; r < s.group_size; ++r) {
      const bool v = element_hash(s, kSourceBits, static_cast<std::uint64_t>(r), first + k) & 1;
      if (s.op == ReduceOp::BXor)
        acc = r == 0 ? v : acc != v;
      else
        acc = is_and ? acc && v : acc || v;
    }
    static_cast<std::uint8_t*>(out)[k] = acc ? 1 : 0;
  }
}

void reduce_float_ordering(const DataSource& s, std::size_t first, std::size_t count, void* out) {
  const std::size_t es = dtype_size(s.dtype);
  std::uint64_t bits = 0;
  for (std::size_t k = 0; k < count; ++k) {
    bool nan = false;
    double best = 0;
    for (int r = 0; r < s.group_size; ++r) {
      fill_float_ordering_contribution(s, r, first + k, 1, &bits);
      const double v = load_element(s.dtype, &bits, 0);
      nan = nan || std::isnan(v);
      const bool better = s.op == ReduceOp::Min ? v < best : v > best;
      if (r == 0 || better) {
        best = v;
        store_bits(out, k, es, bits);  // the winning operand, bit for bit
      }
    }
    if (nan) store_exact_float(s.dtype, out, k, std::nan(""));
  }
}

template <class F>
void by_integer_type(DType dtype, F&& f) {
  switch (dtype) {
    case DType::Int8: f(std::int8_t{}); return;
    case DType::UInt8: f(std::uint8_t{}); return;
    case DType::Int16: f(std::int16_t{}); return;
    case DType::Int32: f(std::int32_t{}); return;
    case DType::Int64: f(std::int64_t{}); return;
    case DType::UInt32: f(std::uint32_t{}); return;
    case DType::UInt64: f(std::uint64_t{}); return;
    default: throw std::logic_error("soak: by_integer_type on a non-integer dtype");
  }
}

std::string bits_hex(DType dtype, const void* data, std::size_t i) {
  const std::size_t es = dtype_size(dtype);
  std::uint64_t bits = 0;
  std::memcpy(&bits, static_cast<const std::uint8_t*>(data) + i * es, es);
  std::ostringstream text;
  text << "0x" << std::hex << std::setw(static_cast<int>(2 * es)) << std::setfill('0') << bits;
  return text.str();
}

}  // namespace

void fill_source(const DataSource& source, int rank, std::size_t first, std::size_t count,
                 void* out) {
  const std::size_t es = dtype_size(source.dtype);
  const auto r = static_cast<std::uint64_t>(rank);
  for (std::size_t k = 0; k < count; ++k) {
    std::uint64_t bits = element_hash(source, kSourceBits, r, first + k);
    if (source.dtype == DType::Bool) bits &= 1;
    store_bits(out, k, es, bits);
  }
}

void fill_contribution(const DataSource& source, int rank, std::size_t first, std::size_t count,
                       void* out) {
  const bool floating = dtype_is_floating(source.dtype);
  if (floating && (source.op == ReduceOp::Min || source.op == ReduceOp::Max)) {
    fill_float_ordering_contribution(source, rank, first, count, out);
  } else if (floating) {
    for (std::size_t k = 0; k < count; ++k)
      store_exact_float(source.dtype, out, k, arithmetic_contribution(source, rank, first + k));
  } else {
    // Integers take arbitrary bits and Bool its low bit: the same as a moving collective's data.
    fill_source(source, rank, first, count, out);
  }
}

void fill_reduction(const DataSource& source, std::size_t first, std::size_t count, void* out) {
  if (source.group_size < 1) throw std::logic_error("soak: fill_reduction over no ranks");
  if (source.dtype == DType::Bool) {
    reduce_bools(source, first, count, out);
  } else if (!dtype_is_floating(source.dtype)) {
    by_integer_type(source.dtype,
                    [&](auto zero) { reduce_integers<decltype(zero)>(source, first, count, out); });
  } else if (source.op == ReduceOp::Min || source.op == ReduceOp::Max) {
    reduce_float_ordering(source, first, count, out);
  } else {
    for (std::size_t k = 0; k < count; ++k) {
      // Exact in double: every contribution and partial result is a small integer.
      double acc = arithmetic_contribution(source, 0, first + k);
      for (int r = 1; r < source.group_size; ++r) {
        const double v = arithmetic_contribution(source, r, first + k);
        acc = source.op == ReduceOp::Prod ? acc * v : acc + v;
      }
      if (source.op == ReduceOp::Avg) acc /= source.group_size;
      store_exact_float(source.dtype, out, k, acc);
    }
  }
}

std::string first_difference(DType dtype, const void* got, const void* expected,
                             std::size_t count) {
  const std::size_t es = dtype_size(dtype);
  const auto* g = static_cast<const std::uint8_t*>(got);
  const auto* e = static_cast<const std::uint8_t*>(expected);
  if (count == 0 || std::memcmp(g, e, count * es) == 0) return {};
  for (std::size_t i = 0; i < count; ++i) {
    if (std::memcmp(g + i * es, e + i * es, es) == 0) continue;
    if (element_is_nan(dtype, expected, i) && element_is_nan(dtype, got, i)) continue;
    std::ostringstream text;
    text << "element " << i << " of " << count << " is " << load_element(dtype, got, i) << " ("
         << bits_hex(dtype, got, i) << "), expected " << load_element(dtype, expected, i) << " ("
         << bits_hex(dtype, expected, i) << ")";
    return text.str();
  }
  return {};
}

}  // namespace cohort::soak
