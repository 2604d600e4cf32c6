#pragma once

// DLPack's element types as cohort's, for the C ABI, which takes them without a tensor.

#include <cohort/dtype.hpp>

#include <dlpack/dlpack.h>

namespace cohort {

/// The DType of a DLPack element type. Throws Error(InvalidArgument) naming the code and bits
/// when cohort has none, or when lanes is not 1.
DType dtype_from_dl(const DLDataType& type);

}  // namespace cohort
