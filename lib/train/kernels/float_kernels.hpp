#pragma once

// Element-wise kernels of the training layer over host memory of the six floating dtypes
// (f32, f64, f16, bf16, fp8 e4m3, fp8 e5m2). Like the reduction kernels (lib/reduce), the loops
// are written once (float_kernels_impl.hpp), compiled once per instruction set, and one table is
// chosen at run time (the ISA lib/reduce detected, so tests that force an ISA force both).
//
// These functions validate nothing but dtype support: callers (cast.cpp, the scaler, the
// synchroniser, clipping) check buffers first. Pointers may be unaligned; count may be 0.

#include <cohort/dtype.hpp>

#include <cstddef>

namespace cohort::train::kernels {

/// True for the six floating dtypes these kernels handle.
bool supported(DType dtype) noexcept;

/// dst[i] = round_to_nearest_even<dst_dtype>(widen(src[i]) * factor) for i < count, computed in
/// f64 when either dtype is f64 (rounded once), in f32 otherwise. Returns true when any src[i]
/// is NaN or infinite (the unscale check: the values as they were, before the factor). src and
/// dst may be the same memory when the dtypes have equal sizes; otherwise they must not overlap.
bool convert(DType src_dtype, const void* src, DType dst_dtype, void* dst, std::size_t count,
             float factor = 1.0f);

/// What norm_part accumulates, in f64.
enum class NormPart : unsigned char { SumSquares, SumAbs, MaxAbs };

/// Σ x², Σ |x| or max |x| over data (0 when count is 0). NaN in the data gives NaN for every
/// part; ±inf gives inf.
double norm_part(DType dtype, const void* data, std::size_t count, NormPart part);

/// Σ |x|^p in f64 for any p > 0 (a scalar loop; the common p are norm_part's).
double sum_abs_pow(DType dtype, const void* data, std::size_t count, double p);

/// data[i] = clamp(data[i], -limit, limit), NaN kept, rounded back to the dtype.
void clamp(DType dtype, void* data, std::size_t count, double limit);

/// The instruction set in use ("avx512", "avx2", "portable").
const char* active_isa() noexcept;

}  // namespace cohort::train::kernels
