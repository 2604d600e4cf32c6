#include "element_codec.hpp"

#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>

namespace cohort::soak {
namespace {

// A binary floating-point format narrower than f32: sign, exponent and mantissa fields.
struct NarrowFormat {
  int exponent_bits;
  int mantissa_bits;
  int bias;
  // IEEE-like: the all-ones exponent holds infinities and NaNs. Otherwise (e4m3fn) it holds
  // normal numbers, except mantissa all-ones, the format's only NaN.
  bool ieee;
  std::uint32_t quiet_nan;  // the pattern stored for a NaN
};

constexpr NarrowFormat kFloat16{5, 10, 15, true, 0x7E00};
constexpr NarrowFormat kBFloat16{8, 7, 127, true, 0x7FC0};
constexpr NarrowFormat kE4M3{4, 3, 7, false, 0x7F};
constexpr NarrowFormat kE5M2{5, 2, 15, true, 0x7E};

const NarrowFormat* narrow_format(DType dtype) {
  switch (dtype) {
    case DType::Float16: return &kFloat16;
    case DType::BFloat16: return &kBFloat16;
    case DType::Float8E4M3: return &kE4M3;
    case DType::Float8E5M2: return &kE5M2;
    default: return nullptr;
  }
}

std::uint32_t read_bits(const void* data, std::size_t i, std::size_t bytes) {
  std::uint32_t bits = 0;
  if (bytes == 1) {
    bits = static_cast<const std::uint8_t*>(data)[i];
  } else {
    std::uint16_t half = 0;
    std::memcpy(&half, static_cast<const std::uint8_t*>(data) + i * 2, 2);
    bits = half;
  }
  return bits;
}

void write_bits(void* data, std::size_t i, std::size_t bytes, std::uint32_t bits) {
  if (bytes == 1) {
    static_cast<std::uint8_t*>(data)[i] = static_cast<std::uint8_t>(bits);
  } else {
    const auto half = static_cast<std::uint16_t>(bits);
    std::memcpy(static_cast<std::uint8_t*>(data) + i * 2, &half, 2);
  }
}

double decode(const NarrowFormat& f, std::uint32_t bits) {
  const std::uint32_t mantissa_mask = (1u << f.mantissa_bits) - 1;
  const std::uint32_t exponent_max = (1u << f.exponent_bits) - 1;
  const bool negative = (bits >> (f.exponent_bits + f.mantissa_bits)) & 1u;
  const std::uint32_t exponent = (bits >> f.mantissa_bits) & exponent_max;
  const std::uint32_t mantissa = bits & mantissa_mask;
  double magnitude = 0;
  if (f.ieee && exponent == exponent_max) {
    magnitude = mantissa == 0 ? std::numeric_limits<double>::infinity()
                              : std::numeric_limits<double>::quiet_NaN();
  } else if (!f.ieee && exponent == exponent_max && mantissa == mantissa_mask) {
    magnitude = std::numeric_limits<double>::quiet_NaN();
  } else if (exponent == 0) {
    // Subnormal: no implicit leading one, the smallest normal exponent.
    magnitude = std::ldexp(static_cast<double>(mantissa), 1 - f.bias - f.mantissa_bits);
  } else {
    magnitude = std::ldexp(static_cast<double>(mantissa | (1u << f.mantissa_bits)),
                           static_cast<int>(exponent) - f.bias - f.mantissa_bits);
  }
  return negative ? -magnitude : magnitude;
}

[[noreturn]] void not_representable(DType dtype, double value) {
  throw std::logic_error("soak: value " + std::to_string(value) +
                         " is not exactly representable in " + std::string(dtype_name(dtype)) +
                         " (the soak's value choice is wrong)");
}

std::uint32_t encode_exact(DType dtype, const NarrowFormat& f, double value) {
  const std::uint32_t sign = std::signbit(value) ? 1u << (f.exponent_bits + f.mantissa_bits) : 0;
  if (std::isnan(value)) return f.quiet_nan;
  if (value == 0) return sign;
  if (std::isinf(value)) {
    if (!f.ieee) not_representable(dtype, value);
    return sign | (((1u << f.exponent_bits) - 1) << f.mantissa_bits);
  }
  const double magnitude = std::fabs(value);
  int e = 0;
  std::frexp(magnitude, &e);  // magnitude = m * 2^e, m in [0.5, 1)
  int biased = e - 1 + f.bias;
  double scaled = 0;  // the significand as an integer, leading one included for normals
  if (biased >= 1) {
    scaled = std::ldexp(magnitude, f.mantissa_bits - (e - 1));
  } else {
    biased = 0;
    scaled = std::ldexp(magnitude, f.mantissa_bits + f.bias - 1);
  }
  if (scaled != std::floor(scaled)) not_representable(dtype, value);
  auto significand = static_cast<std::uint32_t>(scaled);
  const std::uint32_t mantissa_mask = (1u << f.mantissa_bits) - 1;
  const std::uint32_t exponent_max = (1u << f.exponent_bits) - 1;
  const auto exponent = static_cast<std::uint32_t>(biased);
  const std::uint32_t mantissa = significand & mantissa_mask;
  const bool too_large =
      f.ieee ? exponent >= exponent_max
             : exponent > exponent_max || (exponent == exponent_max && mantissa == mantissa_mask);
  if (too_large) not_representable(dtype, value);
  return sign | (exponent << f.mantissa_bits) | mantissa;
}

template <class T>
T read_as(const void* data, std::size_t i) {
  T v;
  std::memcpy(&v, static_cast<const std::uint8_t*>(data) + i * sizeof(T), sizeof(T));
  return v;
}

template <class T>
void write_as(void* data, std::size_t i, T v) {
  std::memcpy(static_cast<std::uint8_t*>(data) + i * sizeof(T), &v, sizeof(T));
}

}  // namespace

double load_element(DType dtype, const void* data, std::size_t i) {
  if (const NarrowFormat* f = narrow_format(dtype))
    return decode(*f, read_bits(data, i, dtype_size(dtype)));
  switch (dtype) {
    case DType::Float32: return read_as<float>(data, i);
    case DType::Float64: return read_as<double>(data, i);
    case DType::Int8: return read_as<std::int8_t>(data, i);
    case DType::UInt8: return read_as<std::uint8_t>(data, i);
    case DType::Int16: return read_as<std::int16_t>(data, i);
    case DType::Int32: return read_as<std::int32_t>(data, i);
    case DType::Int64: return static_cast<double>(read_as<std::int64_t>(data, i));
    case DType::UInt32: return read_as<std::uint32_t>(data, i);
    case DType::UInt64: return static_cast<double>(read_as<std::uint64_t>(data, i));
    case DType::Bool: return read_as<std::uint8_t>(data, i) != 0 ? 1.0 : 0.0;
    default: break;
  }
  throw std::logic_error("soak: load_element: unknown dtype");
}

void store_exact_float(DType dtype, void* data, std::size_t i, double value) {
  if (const NarrowFormat* f = narrow_format(dtype)) {
    write_bits(data, i, dtype_size(dtype), encode_exact(dtype, *f, value));
    return;
  }
  if (dtype == DType::Float64) {
    write_as<double>(data, i, value);
    return;
  }
  if (dtype == DType::Float32) {
    const auto narrowed = static_cast<float>(value);
    if (!std::isnan(value) && static_cast<double>(narrowed) != value)
      not_representable(dtype, value);
    write_as<float>(data, i, narrowed);
    return;
  }
  throw std::logic_error("soak: store_exact_float on " + std::string(dtype_name(dtype)));
}

bool element_is_nan(DType dtype, const void* data, std::size_t i) {
  return dtype_is_floating(dtype) && std::isnan(load_element(dtype, data, i));
}

}  // namespace cohort::soak
