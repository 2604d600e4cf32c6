#pragma once

// Reading and writing single elements of any dtype the benchmark sweeps, as doubles. The check
// uses small integers that every dtype holds exactly, so a double carries them without loss.
// half and bfloat16 are converted here (round to nearest even) because the public API exposes
// no conversion helpers and cohort-bench uses the public API only.

#include <cohort/dtype.hpp>

#include <cstddef>
#include <cstdint>

namespace cohort::bench {

/// Whether load_element/store_element handle `dtype` (every dtype but the fp8 formats and Bool).
bool element_access_supports(DType dtype) noexcept;

/// Element `index` of the array at `base`, converted to double.
double load_element(DType dtype, const void* base, std::size_t index);
/// Converts `value` to `dtype` (integers truncate toward zero, floats round to nearest even) and
/// stores it as element `index` of the array at `base`.
void store_element(DType dtype, void* base, std::size_t index, double value);

/// IEEE binary16 and bfloat16 conversions (round to nearest even, NaN and Inf preserved).
float half_to_float(std::uint16_t bits) noexcept;
std::uint16_t float_to_half(float value) noexcept;
float bfloat16_to_float(std::uint16_t bits) noexcept;
std::uint16_t float_to_bfloat16(float value) noexcept;

/// Largest L such that every integer in [0, L] is exactly representable in `dtype` (capped at
/// 2^53, what a double carries exactly).
double exact_integer_limit(DType dtype) noexcept;
/// The spacing between 1 and the next representable value (0 for integers).
double dtype_epsilon(DType dtype) noexcept;

}  // namespace cohort::bench
