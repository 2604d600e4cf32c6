#include "mpi_peer.hpp"

#include <cohort/error.hpp>

#include <mpi.h>

#include <climits>
#include <cstdio>
#include <cstring>
#include <string>

namespace cohort::bench {
namespace {

// The one place MPI return codes become cohort errors.
void check_mpi(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(rc, text, &length);
  throw Error(ErrorCode::SystemError, std::string(what) + " failed: " +
                                          std::string(text, static_cast<std::size_t>(length)));
}

// MPI's type for a dtype when reducing; null when MPI has none (half, bfloat16).
MPI_Datatype reduce_type(DType dtype) {
  switch (dtype) {
    case DType::Float32: return MPI_FLOAT;
    case DType::Float64: return MPI_DOUBLE;
    case DType::Int8: return MPI_INT8_T;
    case DType::UInt8: return MPI_UINT8_T;
    case DType::Int16: return MPI_INT16_T;
    case DType::Int32: return MPI_INT32_T;
    case DType::UInt32: return MPI_UINT32_T;
    case DType::Int64: return MPI_INT64_T;
    case DType::UInt64: return MPI_UINT64_T;
    default: return MPI_DATATYPE_NULL;
  }
}

// Data movement only needs the element size; 16-bit floats travel as MPI_UINT16_T.
MPI_Datatype move_type(DType dtype) {
  MPI_Datatype t = reduce_type(dtype);
  if (t != MPI_DATATYPE_NULL) return t;
  return dtype_size(dtype) == 2 ? MPI_UINT16_T : MPI_DATATYPE_NULL;
}

MPI_Op mpi_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return MPI_SUM;
    case ReduceOp::Prod: return MPI_PROD;
    case ReduceOp::Min: return MPI_MIN;
    case ReduceOp::Max: return MPI_MAX;
    default: return MPI_OP_NULL;  // avg and the bitwise ops are not offered here
  }
}

int as_int(std::size_t count) {
  return static_cast<int>(count);
}

class MpiImplementation final : public Implementation {
 public:
  MpiImplementation() {
    check_mpi(MPI_Comm_rank(MPI_COMM_WORLD, &rank_), "MPI_Comm_rank");
    check_mpi(MPI_Comm_size(MPI_COMM_WORLD, &size_), "MPI_Comm_size");
  }
  int rank() const { return rank_; }
  int size() const { return size_; }

  std::string_view name() const noexcept override { return "mpi"; }

  std::optional<std::string> unsupported(const OpCall& call) const override {
    if (op_reduces(call.op)) {
      if (reduce_type(call.dtype) == MPI_DATATYPE_NULL) {
        return "MPI has no reduction on " + std::string(dtype_name(call.dtype));
      }
      if (mpi_op(call.redop) == MPI_OP_NULL) {
        return "MPI has no " + std::string(reduce_op_name(call.redop));
      }
    } else if (move_type(call.dtype) == MPI_DATATYPE_NULL) {
      return "no MPI type for " + std::string(dtype_name(call.dtype));
    }
    // MPI_IN_PLACE reduce_scatter_block leaves the result at the start of the buffer, not at
    // the rank's slice where cohort (and the check) expect it.
    if (call.in_place && call.op == BenchOp::ReduceScatter) {
      return "MPI's in-place reduce_scatter uses another layout";
    }
    if (call.in_count > INT_MAX || call.out_count > INT_MAX) return "count exceeds MPI's int";
    return std::nullopt;
  }

  void run(const OpCall& call) override {
    const MPI_Datatype type = op_reduces(call.op) ? reduce_type(call.dtype) : move_type(call.dtype);
    const MPI_Op op = mpi_op(call.redop);
    const bool root = rank_ == call.root;
    const bool ip = call.in_place;
    const int in_n = as_int(call.in_count), out_n = as_int(call.out_count);
    switch (call.op) {
      case BenchOp::Allreduce:
        return check_mpi(
            MPI_Allreduce(ip ? MPI_IN_PLACE : call.in, call.out, out_n, type, op, MPI_COMM_WORLD),
            "MPI_Allreduce");
      case BenchOp::Broadcast:
        // MPI broadcasts in place only; out-of-place, the root first copies its input.
        if (!ip && root && out_n > 0) {
          std::memcpy(call.out, call.in, call.out_count * dtype_size(call.dtype));
        }
        return check_mpi(MPI_Bcast(call.out, out_n, type, call.root, MPI_COMM_WORLD), "MPI_Bcast");
      case BenchOp::Reduce:
        return check_mpi(MPI_Reduce(ip && root ? MPI_IN_PLACE : call.in, call.out, in_n, type, op,
                                    call.root, MPI_COMM_WORLD),
                         "MPI_Reduce");
      case BenchOp::Allgather:
        return check_mpi(MPI_Allgather(ip ? MPI_IN_PLACE : call.in, in_n, type, call.out, in_n,
                                       type, MPI_COMM_WORLD),
                         "MPI_Allgather");
      case BenchOp::ReduceScatter:
        return check_mpi(
            MPI_Reduce_scatter_block(call.in, call.out, out_n, type, op, MPI_COMM_WORLD),
            "MPI_Reduce_scatter_block");
      case BenchOp::Alltoall:
        return check_mpi(MPI_Alltoall(ip ? MPI_IN_PLACE : call.in, out_n / size_, type, call.out,
                                      out_n / size_, type, MPI_COMM_WORLD),
                         "MPI_Alltoall");
      case BenchOp::Gather:
        return check_mpi(MPI_Gather(ip && root ? MPI_IN_PLACE : call.in, in_n, type, call.out, in_n,
                                    type, call.root, MPI_COMM_WORLD),
                         "MPI_Gather");
      case BenchOp::Scatter:
        return check_mpi(MPI_Scatter(call.in, out_n, type, ip && root ? MPI_IN_PLACE : call.out,
                                     out_n, type, call.root, MPI_COMM_WORLD),
                         "MPI_Scatter");
      case BenchOp::Send:
        return check_mpi(
            MPI_Sendrecv(call.in, in_n, type, (rank_ + 1) % size_, 0, call.out, out_n, type,
                         (rank_ - 1 + size_) % size_, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE),
            "MPI_Sendrecv");
      case BenchOp::Barrier: return check_mpi(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
      default:  // not bench ops
        break;
    }
  }

 private:
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace

MpiRuntime::MpiRuntime(int* argc, char*** argv) {
  int provided = 0;
  // Only the main thread calls MPI; cohort's own threads never do.
  check_mpi(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
}

MpiRuntime::~MpiRuntime() {
  if (MPI_Finalize() != MPI_SUCCESS) std::fprintf(stderr, "cohort-bench: MPI_Finalize failed\n");
}

std::unique_ptr<Implementation> make_mpi_peer(int cohort_rank, int cohort_size) {
  auto impl = std::make_unique<MpiImplementation>();
  if (impl->rank() != cohort_rank || impl->size() != cohort_size) {
    throw Error(ErrorCode::InvalidUsage,
                "--peer mpi: MPI sees rank " + std::to_string(impl->rank()) + " of " +
                    std::to_string(impl->size()) + " but cohort sees rank " +
                    std::to_string(cohort_rank) + " of " + std::to_string(cohort_size) +
                    "; start the job with mpirun");
  }
  return impl;
}

}  // namespace cohort::bench
