#include "gpu/gpu_status.hpp"

namespace cohort::gpu {

Error cuda_error(const std::string& what, cudaError_t status) {
  const bool no_gpu = status == cudaErrorNoDevice || status == cudaErrorInsufficientDriver ||
                      status == cudaErrorInvalidDevice;
  return Error(no_gpu ? ErrorCode::Unsupported : ErrorCode::SystemError,
               what + ": " + cudaGetErrorName(status) + ": " + cudaGetErrorString(status));
}

Error nccl_error(const std::string& what, ncclResult_t status) {
  ErrorCode code = ErrorCode::SystemError;
  switch (status) {
    case ncclInvalidArgument: code = ErrorCode::InvalidArgument; break;
    case ncclInvalidUsage: code = ErrorCode::InvalidUsage; break;
    case ncclRemoteError: code = ErrorCode::RemoteError; break;
    default: break;
  }
  return Error(code, what + ": NCCL error " + std::to_string(static_cast<int>(status)) + ": " +
                         ncclGetErrorString(status));
}

}  // namespace cohort::gpu
