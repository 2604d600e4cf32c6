#include "gpu/nccl_types.hpp"

#include <cohort/error.hpp>

#include <string>

namespace cohort::gpu {

std::optional<ncclDataType_t> nccl_dtype(DType dtype) noexcept {
  switch (dtype) {
    case DType::Float32: return ncclFloat32;
    case DType::Float64: return ncclFloat64;
    case DType::Float16: return ncclFloat16;
    case DType::BFloat16: return ncclBfloat16;
#if NCCL_VERSION_CODE >= 22400
    case DType::Float8E4M3: return ncclFloat8e4m3;
    case DType::Float8E5M2: return ncclFloat8e5m2;
#else  // built against an NCCL without fp8: refused like int16
    case DType::Float8E4M3:
    case DType::Float8E5M2: return std::nullopt;
#endif
    case DType::Int8: return ncclInt8;
    case DType::UInt8: return ncclUint8;
    case DType::Int32: return ncclInt32;
    case DType::UInt32: return ncclUint32;
    case DType::Int64: return ncclInt64;
    case DType::UInt64: return ncclUint64;
    case DType::Int16:
    case DType::Bool: return std::nullopt;
  }
  return std::nullopt;
}

std::optional<ncclRedOp_t> nccl_op(ReduceOp op, DType dtype) noexcept {
  switch (op) {
    case ReduceOp::Sum: return ncclSum;
    case ReduceOp::Prod: return ncclProd;
    case ReduceOp::Min: return ncclMin;
    case ReduceOp::Max: return ncclMax;
    case ReduceOp::Avg:
      if (dtype_is_floating(dtype)) return ncclAvg;
      return std::nullopt;
    case ReduceOp::BAnd:
    case ReduceOp::BOr:
    case ReduceOp::BXor: return std::nullopt;
  }
  return std::nullopt;
}

ncclDataType_t require_nccl_dtype(DType dtype, const char* what) {
  if (auto mapped = nccl_dtype(dtype)) return *mapped;
  throw Error(ErrorCode::Unsupported,
              std::string(what) + ": dtype " + std::string(dtype_name(dtype)) +
                  " is not supported on CUDA buffers (NCCL has no such type)");
}

ncclRedOp_t require_nccl_op(ReduceOp op, DType dtype, const char* what) {
  if (auto mapped = nccl_op(op, dtype)) return *mapped;
  throw Error(ErrorCode::Unsupported,
              std::string(what) + ": reduce op " + std::string(reduce_op_name(op)) + " on dtype " +
                  std::string(dtype_name(dtype)) + " is not supported on CUDA buffers");
}

}  // namespace cohort::gpu
