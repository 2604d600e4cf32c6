#include "sweep_data.hpp"

#include "core/float_formats.hpp"

#include <cstring>
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

std::uint64_t bits_of(int rank, std::uint64_t salt, std::size_t i) {
  return mix(mix(salt * 1000003u + static_cast<std::uint64_t>(rank)) ^ i);
}

double float_value(ReduceOp op, int rank, std::uint64_t salt, std::size_t i) {
  const std::uint64_t b = bits_of(rank, salt, i);
  if (op == ReduceOp::Prod) {
    constexpr double kFactors[] = {-2.0, -1.0, 1.0, 2.0};
    return kFactors[b % 4];
  }
  return static_cast<double>(static_cast<int>(b % 17) - 8);
}

double combine_double(ReduceOp op, double a, double b) {
  switch (op) {
    case ReduceOp::Sum: return a + b;
    case ReduceOp::Prod: return a * b;
    case ReduceOp::Min: return b < a ? b : a;
    case ReduceOp::Max: return b > a ? b : a;
    default: return a;
  }
}

template <class T>
T combine_integer(ReduceOp op, T a, T b) {
  using U = std::make_unsigned_t<T>;
  switch (op) {
    case ReduceOp::Sum:
      return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
    case ReduceOp::Prod:
      // Promote to at least unsigned int so the multiplication wraps instead of overflowing int.
      return static_cast<T>(static_cast<U>(static_cast<unsigned long long>(static_cast<U>(a)) *
                                           static_cast<unsigned long long>(static_cast<U>(b))));
    case ReduceOp::Min: return b < a ? b : a;
    case ReduceOp::Max: return b > a ? b : a;
    case ReduceOp::BAnd: return static_cast<T>(a & b);
    case ReduceOp::BOr: return static_cast<T>(a | b);
    case ReduceOp::BXor: return static_cast<T>(a ^ b);
    default: return a;
  }
}

template <class T>
void fill_integers(int rank, std::uint64_t salt, std::size_t first, std::size_t count, void* out) {
  auto* p = static_cast<T*>(out);
  for (std::size_t i = 0; i < count; ++i) p[i] = static_cast<T>(bits_of(rank, salt, first + i));
}

template <class T>
void reduce_integers(ReduceOp op, int world_size, std::uint64_t salt, std::size_t first,
                     std::size_t count, void* out) {
  auto* p = static_cast<T*>(out);
  for (std::size_t i = 0; i < count; ++i) {
    T acc = static_cast<T>(bits_of(0, salt, first + i));
    for (int r = 1; r < world_size; ++r)
      acc = combine_integer<T>(op, acc, static_cast<T>(bits_of(r, salt, first + i)));
    p[i] = acc;
  }
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
    for (std::size_t i = 0; i < count; ++i)
      fp::store_from_double(dtype, out, i, float_value(op, rank, salt, first + i));
    return;
  }
  by_integer_type(dtype,
                  [&](auto zero) { fill_integers<decltype(zero)>(rank, salt, first, count, out); });
}

void fill_reference(DType dtype, ReduceOp op, int world_size, std::uint64_t salt, std::size_t first,
                    std::size_t count, void* out) {
  if (dtype_is_floating(dtype)) {
    for (std::size_t i = 0; i < count; ++i) {
      double acc = float_value(op, 0, salt, first + i);
      for (int r = 1; r < world_size; ++r)
        acc = combine_double(op, acc, float_value(op, r, salt, first + i));
      fp::store_from_double(dtype, out, i, acc);
    }
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
