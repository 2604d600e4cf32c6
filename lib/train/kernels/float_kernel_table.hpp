#pragma once

// Run-time dispatch of the training layer's element-wise kernels (private to lib/train and its
// tests). Each instruction set has one constant table, compiled in its own translation unit
// with that ISA's flags (float_kernels_<isa>.cpp, from float_kernels_impl.hpp);
// float_kernels.cpp uses the table of the instruction set lib/reduce is using, so
// reduce::force_isa() switches both layers at once.

#include <cstddef>

#include "reduce/dispatch.hpp"
#include "train/kernels/float_kernels.hpp"

namespace cohort::train::kernels {

/// The floating dtypes are the first six DType values, so a DType indexes the tables directly.
inline constexpr std::size_t kFloatDTypeCount = 6;
static_assert(static_cast<int>(DType::Float32) == 0 && static_cast<int>(DType::Float64) == 1 &&
              static_cast<int>(DType::Float16) == 2 && static_cast<int>(DType::BFloat16) == 3 &&
              static_cast<int>(DType::Float8E4M3) == 4 && static_cast<int>(DType::Float8E5M2) == 5);
inline constexpr std::size_t kNormPartCount = 3;

/// convert() for one (source, destination) dtype pair; returns the non-finite flag.
using ConvertKernel = bool (*)(const void* src, void* dst, std::size_t count, float factor);
/// norm_part() for one dtype and part.
using NormKernel = double (*)(const void* data, std::size_t count);
/// clamp() for one dtype; `limit` must already be representable in the dtype (see clamp()).
using ClampKernel = void (*)(void* data, std::size_t count, double limit);

/// One instruction set's kernels, every entry non-null.
struct FloatKernelTable {
  ConvertKernel convert[kFloatDTypeCount][kFloatDTypeCount];  ///< [source][destination]
  NormKernel norm[kFloatDTypeCount][kNormPartCount];          ///< [dtype][NormPart]
  ClampKernel clamp[kFloatDTypeCount];
};

/// The tables, defined in their own translation units; the x86 ones exist only on x86-64.
/// Calling a kernel from one on a CPU without its instructions is undefined.
extern const FloatKernelTable kPortableFloatKernels;
#if COHORT_REDUCE_X86
extern const FloatKernelTable kAvx2FloatKernels;
extern const FloatKernelTable kAvx512FloatKernels;
#endif

}  // namespace cohort::train::kernels
