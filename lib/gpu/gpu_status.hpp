#pragma once

// The one place CUDA runtime and NCCL status codes become cohort errors.

#include <cohort/error.hpp>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <string>

namespace cohort::gpu {

/// Error for a failed CUDA runtime call: "<what>: <cudaGetErrorName>: <cudaGetErrorString>".
/// A missing driver or device is Unsupported; everything else SystemError.
Error cuda_error(const std::string& what, cudaError_t status);
/// Error for a failed NCCL call. ncclInvalidArgument / ncclInvalidUsage map to the matching
/// codes, ncclRemoteError to RemoteError, the rest to SystemError.
Error nccl_error(const std::string& what, ncclResult_t status);

inline void check_cuda(cudaError_t status, const char* what) {
  if (status != cudaSuccess) throw cuda_error(what, status);
}
/// ncclInProgress is not a failure: nonblocking communicators report it while work is queued.
inline void check_nccl(ncclResult_t status, const char* what) {
  if (status != ncclSuccess && status != ncclInProgress) throw nccl_error(what, status);
}

}  // namespace cohort::gpu
