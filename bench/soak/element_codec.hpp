#pragma once

// Reading and writing single elements of every cohort dtype through double, written against the
// public API only (the soak checks the library, so it must not borrow the library's own
// conversions from lib/core). The narrow float formats are decoded exactly, subnormals, infinities
// and NaNs included; encoding is exact-only: the soak chooses every value it stores so that it is
// representable, and a value that is not is a bug in the soak, reported as std::logic_error.

#include <cohort/dtype.hpp>

#include <cstddef>
#include <cstdint>

namespace cohort::soak {

/// Element `i` of `data` as a double. Floats exactly (every narrow format and f32 embed in
/// double); integers exactly up to 2^53 (larger 64-bit values are rounded, which only matters
/// for messages: checks compare bytes); Bool as 0 or 1 (any non-zero byte is true).
double load_element(DType dtype, const void* data, std::size_t i);

/// Stores `value` as element `i` of a floating-point buffer. Throws std::logic_error when the
/// value is not exactly representable in `dtype` as zero, a normal number or a NaN (a NaN is
/// stored as the format's canonical quiet NaN), or when `dtype` is not floating-point.
void store_exact_float(DType dtype, void* data, std::size_t i, double value);

/// True when element `i` of a floating-point buffer is a NaN (false for other dtypes).
bool element_is_nan(DType dtype, const void* data, std::size_t i);

}  // namespace cohort::soak
