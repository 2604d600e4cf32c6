#include "gpu/device_support.hpp"

#include <cohort/error.hpp>

#include <fmt/format.h>

namespace cohort::gpu {

DeviceRuntime& require_runtime(std::string_view op) {
  if (DeviceRuntime* runtime = device_runtime()) return *runtime;
  throw Error(ErrorCode::Unsupported,
              fmt::format("{}: CUDA buffers need the GPU backend, but this cohort was built "
                          "without CUDA and NCCL (rebuild where the CUDA toolkit and NCCL are "
                          "found, -Dcuda=enabled)",
                          op));
}

void check_device_dtype(DeviceRuntime& runtime, std::string_view op, DType dtype) {
  if (runtime.nccl_supports(dtype)) return;
  const bool fp8 = dtype == DType::Float8E4M3 || dtype == DType::Float8E5M2;
  if (fp8) {
    const int version = runtime.nccl_version();
    throw Error(
        ErrorCode::Unsupported,
        fmt::format("{}: dtype {} on CUDA buffers needs NCCL 2.24 or later, both the library "
                    "loaded (NCCL {}.{}.{}) and the nccl.h this cohort was built with",
                    op, dtype_name(dtype), version / 10000, version / 100 % 100, version % 100));
  }
  throw Error(ErrorCode::Unsupported,
              fmt::format("{}: dtype {} is not supported on CUDA buffers (NCCL has no such type; "
                          "copy to a host buffer or convert to a type NCCL has)",
                          op, dtype_name(dtype)));
}

void check_device_reduce_op(std::string_view op, ReduceOp reduce_op, DType dtype) {
  switch (reduce_op) {
    case ReduceOp::Sum:
    case ReduceOp::Prod:
    case ReduceOp::Min:
    case ReduceOp::Max: return;
    case ReduceOp::Avg:
      if (dtype_is_floating(dtype)) return;
      break;
    case ReduceOp::BAnd:
    case ReduceOp::BOr:
    case ReduceOp::BXor: break;
  }
  throw Error(ErrorCode::Unsupported,
              fmt::format("{}: reduce op {} on dtype {} is not supported on CUDA buffers (NCCL "
                          "has no bitwise reductions and no integer average)",
                          op, reduce_op_name(reduce_op), dtype_name(dtype)));
}

}  // namespace cohort::gpu
