#pragma once

// What the GPU path can run, decided on the caller's thread before an op is numbered or queued:
// every rank refuses the same arguments alike, so a refusal leaves the communicator usable.

#include <cohort/dtype.hpp>

#include "gpu/device_runtime.hpp"

#include <string_view>

namespace cohort::gpu {

/// The runtime, or Error(Unsupported) naming `op` when cohort has none (built without CUDA).
DeviceRuntime& require_runtime(std::string_view op);
/// Unsupported naming `op` and `dtype` unless NCCL has it (int16 and bool never; fp8 from NCCL
/// 2.24, the message then says which NCCL this is).
void check_device_dtype(DeviceRuntime& runtime, std::string_view op, DType dtype);
/// Unsupported naming `op`, the reduce op and the dtype for what NCCL lacks: bitwise ops and the
/// integer average (cohort's truncates, NCCL's has no integer form).
void check_device_reduce_op(std::string_view op, ReduceOp reduce_op, DType dtype);

}  // namespace cohort::gpu
