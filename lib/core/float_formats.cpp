#include "core/float_formats.hpp"

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

namespace cohort::fp {
namespace {

template <class T>
T read(const void* data, std::size_t index) {
  T value;
  std::memcpy(&value, static_cast<const char*>(data) + index * sizeof(T), sizeof(T));
  return value;
}

template <class T>
void write(void* data, std::size_t index, T value) {
  std::memcpy(static_cast<char*>(data) + index * sizeof(T), &value, sizeof(T));
}

template <class T>
T saturate(double value) {
  if (std::isnan(value)) return T{0};
  const double lo = static_cast<double>(std::numeric_limits<T>::min());
  const double hi = static_cast<double>(std::numeric_limits<T>::max());
  if (value <= lo) return std::numeric_limits<T>::min();
  // For 64-bit types `hi` rounds up to 2^63 / 2^64, which itself is out of range.
  if (value >= hi) return std::numeric_limits<T>::max();
  return static_cast<T>(value);
}

// Narrows a double to float rounding to odd: truncate toward zero, then set the last mantissa
// bit if anything was dropped. The sticky bit stops a second rounding (to half, bf16 or fp8, all
// far narrower than float) from seeing a false tie, so double -> float -> narrow rounds as if
// done once; two round-to-nearest steps would not (1 + 2^-11 + 2^-40 would become half 1.0).
float narrow_round_to_odd(double value) {
  if (!std::isfinite(value)) return static_cast<float>(value);
  float narrowed = static_cast<float>(value);
  if (std::fabs(static_cast<double>(narrowed)) > std::fabs(value))
    narrowed = std::nextafter(narrowed, 0.0f);  // also brings an overflow to inf back to max
  if (static_cast<double>(narrowed) != value)
    narrowed = std::bit_cast<float>(std::bit_cast<std::uint32_t>(narrowed) | 1u);
  return narrowed;
}

}  // namespace

double load_as_double(DType dtype, const void* data, std::size_t index) noexcept {
  switch (dtype) {
    case DType::Float32: return read<float>(data, index);
    case DType::Float64: return read<double>(data, index);
    case DType::Float16: return half_to_float(read<std::uint16_t>(data, index));
    case DType::BFloat16: return bf16_to_float(read<std::uint16_t>(data, index));
    case DType::Float8E4M3: return e4m3_to_float(read<std::uint8_t>(data, index));
    case DType::Float8E5M2: return e5m2_to_float(read<std::uint8_t>(data, index));
    case DType::Int8: return read<std::int8_t>(data, index);
    case DType::UInt8: return read<std::uint8_t>(data, index);
    case DType::Int16: return read<std::int16_t>(data, index);
    case DType::Int32: return read<std::int32_t>(data, index);
    case DType::Int64: return static_cast<double>(read<std::int64_t>(data, index));
    case DType::UInt32: return read<std::uint32_t>(data, index);
    case DType::UInt64: return static_cast<double>(read<std::uint64_t>(data, index));
    case DType::Bool: return read<std::uint8_t>(data, index) != 0 ? 1.0 : 0.0;
  }
  return 0.0;
}

void store_from_double(DType dtype, void* data, std::size_t index, double value) noexcept {
  switch (dtype) {
    case DType::Float32: write(data, index, static_cast<float>(value)); return;
    case DType::Float64: write(data, index, value); return;
    case DType::Float16: write(data, index, float_to_half(narrow_round_to_odd(value))); return;
    case DType::BFloat16: write(data, index, float_to_bf16(narrow_round_to_odd(value))); return;
    case DType::Float8E4M3: write(data, index, float_to_e4m3(narrow_round_to_odd(value))); return;
    case DType::Float8E5M2: write(data, index, float_to_e5m2(narrow_round_to_odd(value))); return;
    case DType::Int8: write(data, index, saturate<std::int8_t>(value)); return;
    case DType::UInt8: write(data, index, saturate<std::uint8_t>(value)); return;
    case DType::Int16: write(data, index, saturate<std::int16_t>(value)); return;
    case DType::Int32: write(data, index, saturate<std::int32_t>(value)); return;
    case DType::Int64: write(data, index, saturate<std::int64_t>(value)); return;
    case DType::UInt32: write(data, index, saturate<std::uint32_t>(value)); return;
    case DType::UInt64: write(data, index, saturate<std::uint64_t>(value)); return;
    case DType::Bool: write(data, index, static_cast<std::uint8_t>(value != 0.0)); return;
  }
}

}  // namespace cohort::fp
