// The dtype/op mapping onto NCCL, checked against NCCL's documented enum values, and the
// refusals for what NCCL cannot do. Runs without a GPU.

#include <cohort/error.hpp>

#include "gpu/gpu_status.hpp"
#include "gpu/nccl_types.hpp"

#include <catch2/catch.hpp>

using namespace cohort;

TEST_CASE("every dtype NCCL has maps to NCCL's own code", "[gpu]") {
  // Values from nccl.h's ncclDataType_t, written out here rather than taken from the mapping.
  CHECK(gpu::nccl_dtype(DType::Int8) == ncclDataType_t(0));
  CHECK(gpu::nccl_dtype(DType::UInt8) == ncclDataType_t(1));
  CHECK(gpu::nccl_dtype(DType::Int32) == ncclDataType_t(2));
  CHECK(gpu::nccl_dtype(DType::UInt32) == ncclDataType_t(3));
  CHECK(gpu::nccl_dtype(DType::Int64) == ncclDataType_t(4));
  CHECK(gpu::nccl_dtype(DType::UInt64) == ncclDataType_t(5));
  CHECK(gpu::nccl_dtype(DType::Float16) == ncclDataType_t(6));
  CHECK(gpu::nccl_dtype(DType::Float32) == ncclDataType_t(7));
  CHECK(gpu::nccl_dtype(DType::Float64) == ncclDataType_t(8));
  CHECK(gpu::nccl_dtype(DType::BFloat16) == ncclDataType_t(9));
#if NCCL_VERSION_CODE >= 22400
  CHECK(gpu::nccl_dtype(DType::Float8E4M3) == ncclDataType_t(10));
  CHECK(gpu::nccl_dtype(DType::Float8E5M2) == ncclDataType_t(11));
#else  // a header without fp8: refused like int16
  CHECK_FALSE(gpu::nccl_dtype(DType::Float8E4M3).has_value());
  CHECK_FALSE(gpu::nccl_dtype(DType::Float8E5M2).has_value());
#endif
}

TEST_CASE("dtypes NCCL lacks are refused by name", "[gpu]") {
  CHECK_FALSE(gpu::nccl_dtype(DType::Int16).has_value());
  CHECK_FALSE(gpu::nccl_dtype(DType::Bool).has_value());
  try {
    gpu::require_nccl_dtype(DType::Int16, "allreduce #3");
    FAIL("int16 was accepted");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::Unsupported);
    CHECK_THAT(e.what(), Catch::Contains("int16") && Catch::Contains("allreduce #3"));
  }
}

TEST_CASE("reduce ops map to NCCL's built-in ops; bitwise and integer avg are refused", "[gpu]") {
  CHECK(gpu::nccl_op(ReduceOp::Sum, DType::Float32) == ncclRedOp_t(0));
  CHECK(gpu::nccl_op(ReduceOp::Prod, DType::Int32) == ncclRedOp_t(1));
  CHECK(gpu::nccl_op(ReduceOp::Max, DType::BFloat16) == ncclRedOp_t(2));
  CHECK(gpu::nccl_op(ReduceOp::Min, DType::UInt8) == ncclRedOp_t(3));
  CHECK(gpu::nccl_op(ReduceOp::Avg, DType::Float16) == ncclRedOp_t(4));
  CHECK_FALSE(gpu::nccl_op(ReduceOp::Avg, DType::Int32).has_value());
  for (ReduceOp op : {ReduceOp::BAnd, ReduceOp::BOr, ReduceOp::BXor}) {
    CHECK_FALSE(gpu::nccl_op(op, DType::Int64).has_value());
    try {
      gpu::require_nccl_op(op, DType::Int64, "reduce #1");
      FAIL("bitwise op was accepted");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::Unsupported);
      CHECK_THAT(e.what(), Catch::Contains(std::string(reduce_op_name(op))));
    }
  }
}

TEST_CASE("NCCL and CUDA statuses become typed errors", "[gpu]") {
  CHECK(gpu::nccl_error("x", ncclInvalidArgument).code() == ErrorCode::InvalidArgument);
  CHECK(gpu::nccl_error("x", ncclInvalidUsage).code() == ErrorCode::InvalidUsage);
  CHECK(gpu::nccl_error("x", ncclRemoteError).code() == ErrorCode::RemoteError);
  CHECK(gpu::nccl_error("x", ncclSystemError).code() == ErrorCode::SystemError);
  CHECK_THAT(gpu::nccl_error("ncclAllReduce", ncclUnhandledCudaError).what(),
             Catch::Contains("ncclAllReduce"));
  CHECK(gpu::cuda_error("x", cudaErrorNoDevice).code() == ErrorCode::Unsupported);
  CHECK(gpu::cuda_error("x", cudaErrorMemoryAllocation).code() == ErrorCode::SystemError);
}
