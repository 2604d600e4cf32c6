#include "element_access.hpp"

#include <cohort/error.hpp>

#include <bit>
#include <cmath>
#include <cstring>
#include <string>

namespace cohort::bench {
namespace {

template <class T>
T load_as(const void* base, std::size_t index) {
  T value;
  std::memcpy(&value, static_cast<const unsigned char*>(base) + index * sizeof(T), sizeof(T));
  return value;
}

template <class T>
void store_as(void* base, std::size_t index, T value) {
  std::memcpy(static_cast<unsigned char*>(base) + index * sizeof(T), &value, sizeof(T));
}

[[noreturn]] void unsupported(DType dtype) {
  throw Error(ErrorCode::Unsupported,
              "cohort-bench cannot check dtype " + std::string(dtype_name(dtype)));
}

}  // namespace

float half_to_float(std::uint16_t bits) noexcept {
  const std::uint32_t sign = static_cast<std::uint32_t>(bits & 0x8000u) << 16;
  const std::uint32_t exponent = (bits >> 10) & 0x1fu;
  std::uint32_t mantissa = bits & 0x3ffu;
  std::uint32_t out;
  if (exponent == 0x1f) {
    out = sign | 0x7f800000u | (mantissa << 13);  // Inf or NaN
  } else if (exponent != 0) {
    out = sign | ((exponent + 112) << 23) | (mantissa << 13);  // rebias 15 -> 127
  } else if (mantissa == 0) {
    out = sign;  // signed zero
  } else {
    // Subnormal: shift the mantissa up until its leading one becomes the implicit bit.
    std::uint32_t e = 113;
    while ((mantissa & 0x400u) == 0) {
      mantissa <<= 1;
      --e;
    }
    out = sign | (e << 23) | ((mantissa & 0x3ffu) << 13);
  }
  return std::bit_cast<float>(out);
}

std::uint16_t float_to_half(float value) noexcept {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(value);
  const auto sign = static_cast<std::uint16_t>((x >> 16) & 0x8000u);
  const std::uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) {  // Inf or NaN (keep NaN quiet and non-zero)
    return static_cast<std::uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
  }
  if (abs >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // rounds to Inf
  if (abs < 0x38800000u) {
    // Result is subnormal or zero: value / 2^-24, rounded to nearest even.
    const float scaled = std::bit_cast<float>(abs) * 16777216.0f;
    return static_cast<std::uint16_t>(sign | static_cast<std::uint16_t>(std::nearbyint(scaled)));
  }
  // Normal: drop 13 mantissa bits with round to nearest even, rebias 127 -> 15.
  const std::uint32_t rounded = abs + 0xfffu + ((abs >> 13) & 1u);
  return static_cast<std::uint16_t>(sign | ((rounded - 0x38000000u) >> 13));
}

float bfloat16_to_float(std::uint16_t bits) noexcept {
  return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
}

std::uint16_t float_to_bfloat16(float value) noexcept {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(value);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((x >> 16) | 0x40u);
  const std::uint32_t rounded = x + 0x7fffu + ((x >> 16) & 1u);
  return static_cast<std::uint16_t>(rounded >> 16);
}

bool element_access_supports(DType dtype) noexcept {
  switch (dtype) {
    case DType::Float8E4M3:
    case DType::Float8E5M2:
    case DType::Bool: return false;
    default: return true;
  }
}

double load_element(DType dtype, const void* base, std::size_t index) {
  switch (dtype) {
    case DType::Float32: return load_as<float>(base, index);
    case DType::Float64: return load_as<double>(base, index);
    case DType::Float16: return half_to_float(load_as<std::uint16_t>(base, index));
    case DType::BFloat16: return bfloat16_to_float(load_as<std::uint16_t>(base, index));
    case DType::Int8: return load_as<std::int8_t>(base, index);
    case DType::UInt8: return load_as<std::uint8_t>(base, index);
    case DType::Int16: return load_as<std::int16_t>(base, index);
    case DType::Int32: return load_as<std::int32_t>(base, index);
    case DType::Int64: return static_cast<double>(load_as<std::int64_t>(base, index));
    case DType::UInt32: return load_as<std::uint32_t>(base, index);
    case DType::UInt64: return static_cast<double>(load_as<std::uint64_t>(base, index));
    default: unsupported(dtype);
  }
}

void store_element(DType dtype, void* base, std::size_t index, double value) {
  switch (dtype) {
    case DType::Float32: return store_as(base, index, static_cast<float>(value));
    case DType::Float64: return store_as(base, index, value);
    case DType::Float16: return store_as(base, index, float_to_half(static_cast<float>(value)));
    case DType::BFloat16:
      return store_as(base, index, float_to_bfloat16(static_cast<float>(value)));
    case DType::Int8: return store_as(base, index, static_cast<std::int8_t>(value));
    case DType::UInt8: return store_as(base, index, static_cast<std::uint8_t>(value));
    case DType::Int16: return store_as(base, index, static_cast<std::int16_t>(value));
    case DType::Int32: return store_as(base, index, static_cast<std::int32_t>(value));
    case DType::Int64: return store_as(base, index, static_cast<std::int64_t>(value));
    case DType::UInt32: return store_as(base, index, static_cast<std::uint32_t>(value));
    case DType::UInt64: return store_as(base, index, static_cast<std::uint64_t>(value));
    default: unsupported(dtype);
  }
}

double exact_integer_limit(DType dtype) noexcept {
  switch (dtype) {
    case DType::Int8: return 127;
    case DType::UInt8: return 255;
    case DType::Int16: return 32767;
    case DType::Float16: return 2048;
    case DType::BFloat16: return 256;
    case DType::Float32: return 16777216.0;
    case DType::Int32: return 2147483647.0;
    case DType::UInt32: return 4294967295.0;
    default: return 9007199254740992.0;
  }
}

double dtype_epsilon(DType dtype) noexcept {
  switch (dtype) {
    case DType::Float32: return 0x1p-23;
    case DType::Float64: return 0x1p-52;
    case DType::Float16: return 0x1p-10;
    case DType::BFloat16: return 0x1p-7;
    default: return 0.0;
  }
}

}  // namespace cohort::bench
