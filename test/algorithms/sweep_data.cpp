#include "sweep_data.hpp"

#include "core/float_formats.hpp"

#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

namespace cohort::sweep {
namespace {

std::uint64_t mix(std::uint64_t x) {
  // splitmix64 finaliser: every input bit affects every output bit.
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Rank r's generator output for element i is mix(rank_seed(r, salt) ^ i). The per-rank half is
// computed once per fill, not per element: generating data and references was two thirds of the
// sweep's time.
std::uint64_t rank_seed(int rank, std::uint64_t salt) {
  return mix(salt * 1000003u + static_cast<std::uint64_t>(rank));
}

std::vector<std::uint64_t> rank_seeds(int world_size, std::uint64_t salt) {
  std::vector<std::uint64_t> seeds(static_cast<std::size_t>(world_size));
  for (int r = 0; r < world_size; ++r) seeds[static_cast<std::size_t>(r)] = rank_seed(r, salt);
  return seeds;
}

/// The floating-point datum for generator output `bits`, as the small integer it is.
int float_value(ReduceOp op, std::uint64_t bits) {
  if (op == ReduceOp::Prod) {
    constexpr int kFactors[] = {-2, -1, 1, 2};
    return kFactors[bits % 4];
  }
  // The high 32 bits scaled to [0, 17) (a multiply, not a division).
  return static_cast<int>(((bits >> 32) * 17) >> 32) - 8;
}

// Every floating-point datum and partial result is an integer in [-kLimit, kLimit] (sums of up
// to 8 values in [-8, 8], products of up to 8 factors of magnitude <= 2), so integer arithmetic
// computes them exactly, and each dtype's encoding of them is looked up, not converted per
// element.
constexpr int kLimit = 256;

/// Calls f(std::integral_constant<ReduceOp, op>{}), so the loops below are compiled once per op
/// instead of branching on it per element.
template <class F>
void with_op(ReduceOp op, F&& f) {
  switch (op) {
    case ReduceOp::Sum: f(std::integral_constant<ReduceOp, ReduceOp::Sum>{}); break;
    case ReduceOp::Prod: f(std::integral_constant<ReduceOp, ReduceOp::Prod>{}); break;
    case ReduceOp::Min: f(std::integral_constant<ReduceOp, ReduceOp::Min>{}); break;
    case ReduceOp::Max: f(std::integral_constant<ReduceOp, ReduceOp::Max>{}); break;
    case ReduceOp::BAnd: f(std::integral_constant<ReduceOp, ReduceOp::BAnd>{}); break;
    case ReduceOp::BOr: f(std::integral_constant<ReduceOp, ReduceOp::BOr>{}); break;
    case ReduceOp::BXor: f(std::integral_constant<ReduceOp, ReduceOp::BXor>{}); break;
    default: throw std::logic_error("sweep: no reference for this op");
  }
}

/// a op b for the small integers standing for floating-point data (exact: see kLimit).
template <ReduceOp Op>
int combine_small(int a, int b) {
  if constexpr (Op == ReduceOp::Sum) return a + b;
  if constexpr (Op == ReduceOp::Prod) return a * b;
  if constexpr (Op == ReduceOp::Min) return b < a ? b : a;
  if constexpr (Op == ReduceOp::Max) return b > a ? b : a;
  throw std::logic_error("sweep: a bitwise op on floating-point data");
}

/// Writes small integers in a floating-point dtype: element type Bits (the dtype's size), each
/// value's encoding computed once by fp::store_from_double.
template <class Bits>
class SmallIntegerWriter {
 public:
  explicit SmallIntegerWriter(DType dtype) : table_(2 * kLimit + 1) {
    for (int v = -kLimit; v <= kLimit; ++v)
      fp::store_from_double(dtype, table_.data(), static_cast<std::size_t>(v + kLimit), v);
  }
  void write(void* out, std::size_t i, int value) const {
    if (value < -kLimit || value > kLimit)
      throw std::logic_error("sweep datum " + std::to_string(value) + " outside the exact range");
    static_cast<Bits*>(out)[i] = table_[static_cast<std::size_t>(value + kLimit)];
  }

 private:
  std::vector<Bits> table_;
};

/// Calls f(writer) with a SmallIntegerWriter of the floating-point dtype's size.
template <class F>
void with_float_writer(DType dtype, F&& f) {
  switch (dtype_size(dtype)) {
    case 1: f(SmallIntegerWriter<std::uint8_t>(dtype)); break;
    case 2: f(SmallIntegerWriter<std::uint16_t>(dtype)); break;
    case 4: f(SmallIntegerWriter<std::uint32_t>(dtype)); break;
    case 8: f(SmallIntegerWriter<std::uint64_t>(dtype)); break;
    default: throw std::logic_error("sweep: no floating-point dtype of this size");
  }
}

/// a op b in T, wrapping as the kernels do.
template <ReduceOp Op, class T>
T combine_integer(T a, T b) {
  using U = std::make_unsigned_t<T>;
  if constexpr (Op == ReduceOp::Sum)
    return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
  // Promote to at least unsigned int so the multiplication wraps instead of overflowing int.
  if constexpr (Op == ReduceOp::Prod)
    return static_cast<T>(static_cast<U>(static_cast<unsigned long long>(static_cast<U>(a)) *
                                         static_cast<unsigned long long>(static_cast<U>(b))));
  if constexpr (Op == ReduceOp::Min) return b < a ? b : a;
  if constexpr (Op == ReduceOp::Max) return b > a ? b : a;
  if constexpr (Op == ReduceOp::BAnd) return static_cast<T>(a & b);
  if constexpr (Op == ReduceOp::BOr) return static_cast<T>(a | b);
  if constexpr (Op == ReduceOp::BXor) return static_cast<T>(a ^ b);
}

template <class T>
void fill_integers(int rank, std::uint64_t salt, std::size_t first, std::size_t count, void* out) {
  auto* p = static_cast<T*>(out);
  const std::uint64_t seed = rank_seed(rank, salt);
  for (std::size_t i = 0; i < count; ++i) p[i] = static_cast<T>(mix(seed ^ (first + i)));
}

// References accumulate rank by rank (rank-outer loops): each pass over the elements is a
// branch-free loop of independent iterations.
template <class T>
void reduce_integers(ReduceOp op, int world_size, std::uint64_t salt, std::size_t first,
                     std::size_t count, void* out) {
  auto* p = static_cast<T*>(out);
  const auto seeds = rank_seeds(world_size, salt);
  for (std::size_t i = 0; i < count; ++i) p[i] = static_cast<T>(mix(seeds[0] ^ (first + i)));
  with_op(op, [&](auto op_constant) {
    for (int r = 1; r < world_size; ++r) {
      const std::uint64_t seed = seeds[static_cast<std::size_t>(r)];
      for (std::size_t i = 0; i < count; ++i)
        p[i] = combine_integer<op_constant()>(p[i], static_cast<T>(mix(seed ^ (first + i))));
    }
  });
}

template <class F>
void by_integer_type(DType dtype, F&& f) {
  switch (dtype) {
    case DType::Int8: f(std::int8_t{}); break;
    case DType::UInt8: f(std::uint8_t{}); break;
    case DType::Int16: f(std::int16_t{}); break;
    case DType::Int32: f(std::int32_t{}); break;
    case DType::Int64: f(std::int64_t{}); break;
    case DType::UInt32: f(std::uint32_t{}); break;
    case DType::UInt64: f(std::uint64_t{}); break;
    default: break;
  }
}

}  // namespace

bool op_applies(ReduceOp op, DType dtype) {
  if (op == ReduceOp::Avg) return false;
  if (dtype_is_floating(dtype))
    return op == ReduceOp::Sum || op == ReduceOp::Prod || op == ReduceOp::Min ||
           op == ReduceOp::Max;
  return dtype_is_integer(dtype);
}

void fill_contribution(DType dtype, ReduceOp op, int rank, std::uint64_t salt, std::size_t first,
                       std::size_t count, void* out) {
  if (dtype_is_floating(dtype)) {
    const std::uint64_t seed = rank_seed(rank, salt);
    with_float_writer(dtype, [&](const auto& writer) {
      for (std::size_t i = 0; i < count; ++i)
        writer.write(out, i, float_value(op, mix(seed ^ (first + i))));
    });
    return;
  }
  by_integer_type(dtype,
                  [&](auto zero) { fill_integers<decltype(zero)>(rank, salt, first, count, out); });
}

void fill_reference(DType dtype, ReduceOp op, int world_size, std::uint64_t salt, std::size_t first,
                    std::size_t count, void* out) {
  if (dtype_is_floating(dtype)) {
    const auto seeds = rank_seeds(world_size, salt);
    std::vector<int> acc(count);
    for (std::size_t i = 0; i < count; ++i) acc[i] = float_value(op, mix(seeds[0] ^ (first + i)));
    with_op(op, [&](auto op_constant) {
      for (int r = 1; r < world_size; ++r) {
        const std::uint64_t seed = seeds[static_cast<std::size_t>(r)];
        for (std::size_t i = 0; i < count; ++i)
          acc[i] = combine_small<op_constant()>(acc[i], float_value(op, mix(seed ^ (first + i))));
      }
    });
    with_float_writer(dtype, [&](const auto& writer) {
      for (std::size_t i = 0; i < count; ++i) writer.write(out, i, acc[i]);
    });
    return;
  }
  by_integer_type(dtype, [&](auto zero) {
    reduce_integers<decltype(zero)>(op, world_size, salt, first, count, out);
  });
}

std::string first_mismatch(DType dtype, const void* got, const void* expected, std::size_t count) {
  const std::size_t es = dtype_size(dtype);
  const auto* g = static_cast<const unsigned char*>(got);
  const auto* e = static_cast<const unsigned char*>(expected);
  if (count == 0 || std::memcmp(g, e, count * es) == 0) return {};
  for (std::size_t i = 0; i < count; ++i) {
    if (std::memcmp(g + i * es, e + i * es, es) != 0) {
      return "element " + std::to_string(i) + " of " + std::to_string(count) + ": got " +
             std::to_string(fp::load_as_double(dtype, got, i)) + ", expected " +
             std::to_string(fp::load_as_double(dtype, expected, i));
    }
  }
  return {};
}

}  // namespace cohort::sweep
