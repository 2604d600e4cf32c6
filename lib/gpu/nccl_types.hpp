#pragma once

// cohort's dtypes and reduce ops in NCCL's terms. NCCL has no 16-bit integers, no unsigned
// 64-bit-safe bool semantics and no bitwise reductions, so those combinations are refused with
// an error naming them rather than silently reinterpreted.

#include <cohort/dtype.hpp>

#include <nccl.h>

#include <optional>

namespace cohort::gpu {

/// NCCL's type for `dtype`, or nothing when NCCL has no equivalent (Int16, Bool).
std::optional<ncclDataType_t> nccl_dtype(DType dtype) noexcept;
/// NCCL's built-in op for `op`, or nothing (bitwise ops). Avg maps to ncclAvg for floats only:
/// NCCL's integer average differs from cohort's truncating one, so integer Avg is refused too.
std::optional<ncclRedOp_t> nccl_op(ReduceOp op, DType dtype) noexcept;

/// As above, throwing Error(Unsupported) naming `what`, the dtype and the op.
ncclDataType_t require_nccl_dtype(DType dtype, const char* what);
ncclRedOp_t require_nccl_op(ReduceOp op, DType dtype, const char* what);

}  // namespace cohort::gpu
