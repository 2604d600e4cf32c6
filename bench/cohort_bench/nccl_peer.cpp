// The NCCL peer: see nccl_peer.hpp.

#include "nccl_peer.hpp"

#include <cohort/error.hpp>

#include <cuda_runtime_api.h>
#include <fmt/format.h>
#include <nccl.h>

#include <cstring>
#include <string>

namespace cohort::bench {
namespace {

using Clock = std::chrono::steady_clock;

constexpr const char* kUniqueIdKey = "unique_id";

void check_cuda(cudaError_t status, const char* call) {
  if (status != cudaSuccess)
    throw Error(ErrorCode::SystemError,
                fmt::format("NCCL peer: {}: {}", call, cudaGetErrorString(status)));
}

void check_nccl(ncclResult_t status, const char* call) {
  if (status != ncclSuccess)
    throw Error(status == ncclRemoteError ? ErrorCode::RemoteError : ErrorCode::SystemError,
                fmt::format("NCCL peer: {}: {}", call, ncclGetErrorString(status)));
}

// The bench's dtypes (kBenchDTypes) all exist in NCCL.
ncclDataType_t nccl_type(DType dtype) {
  switch (dtype) {
    case DType::Float32: return ncclFloat32;
    case DType::Float64: return ncclFloat64;
    case DType::Float16: return ncclFloat16;
    case DType::BFloat16: return ncclBfloat16;
    case DType::Int8: return ncclInt8;
    case DType::UInt8: return ncclUint8;
    case DType::Int32: return ncclInt32;
    case DType::UInt32: return ncclUint32;
    case DType::Int64: return ncclInt64;
    case DType::UInt64: return ncclUint64;
    default: break;
  }
  throw Error(ErrorCode::Unsupported,
              "NCCL peer: no NCCL type for " + std::string(dtype_name(dtype)));
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return ncclSum;
    case ReduceOp::Prod: return ncclProd;
    case ReduceOp::Min: return ncclMin;
    case ReduceOp::Max: return ncclMax;
    case ReduceOp::Avg: return ncclAvg;
    default: break;
  }
  throw Error(ErrorCode::Unsupported,
              "NCCL peer: NCCL has no " + std::string(reduce_op_name(op)) + " reduction");
}

// Elements as bytes from `base`, for the blocks of the grouped ops.
void* offset(void* base, std::size_t elements, DType dtype) {
  return static_cast<unsigned char*>(base) + elements * dtype_size(dtype);
}

class NcclImplementation final : public Implementation {
 public:
  NcclImplementation(std::shared_ptr<cohort::Store> store, int rank, int size,
                     std::chrono::milliseconds timeout)
      : rank_(rank), size_(size), timeout_(timeout) {
    ncclUniqueId id;
    if (rank == 0) {
      check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
      const auto* bytes = reinterpret_cast<const std::uint8_t*>(&id);
      store->set(kUniqueIdKey, Bytes(bytes, bytes + sizeof id));
    } else {
      const Bytes bytes = store->get(kUniqueIdKey, timeout);
      if (bytes.size() != sizeof id)
        throw Error(ErrorCode::Internal,
                    fmt::format("NCCL peer: the unique id in the store has {} bytes, not {}",
                                bytes.size(), sizeof id));
      std::memcpy(&id, bytes.data(), sizeof id);
    }
    check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    const ncclResult_t init = ncclCommInitRank(&comm_, size, id, rank);
    if (init != ncclSuccess) {
      cudaStreamDestroy(stream_);
      check_nccl(init, "ncclCommInitRank");
    }
  }

  ~NcclImplementation() override {
    // A communicator aborted after a failed op is already gone.
    if (comm_ != nullptr) ncclCommDestroy(comm_);
    cudaStreamDestroy(stream_);
  }
  NcclImplementation(const NcclImplementation&) = delete;
  NcclImplementation& operator=(const NcclImplementation&) = delete;

  std::string_view name() const noexcept override { return "nccl"; }

  std::optional<std::string> unsupported(const OpCall& call) const override {
    if (call.op == BenchOp::Barrier) return "NCCL has no barrier";
    if (op_reduces(call.op) && call.redop == ReduceOp::Avg && !dtype_is_floating(call.dtype))
      return "avg of integers is not compared (cohort's device path refuses it)";
    // Alltoall, gather and scatter are grouped send/recv here (NCCL has no such collective),
    // which has no in-place form.
    if (call.in_place &&
        (call.op == BenchOp::Alltoall || call.op == BenchOp::Gather || call.op == BenchOp::Scatter))
      return "NCCL has no in-place " + std::string(bench_op_name(call.op));
    return std::nullopt;
  }

  void run(const OpCall& call) override {
    if (comm_ == nullptr)
      throw Error(ErrorCode::InvalidUsage, "NCCL peer: the communicator was aborted earlier");
    enqueue(call);
    synchronize(call);
  }

 private:
  void enqueue(const OpCall& call) {
    const ncclDataType_t type = nccl_type(call.dtype);
    switch (call.op) {
      case BenchOp::Allreduce:
        return check_nccl(ncclAllReduce(call.in, call.out, call.in_count, type, nccl_op(call.redop),
                                        comm_, stream_),
                          "ncclAllReduce");
      case BenchOp::Broadcast:
        return check_nccl(
            ncclBroadcast(call.in, call.out, call.out_count, type, call.root, comm_, stream_),
            "ncclBroadcast");
      case BenchOp::Reduce:
        return check_nccl(ncclReduce(call.in, call.out, call.in_count, type, nccl_op(call.redop),
                                     call.root, comm_, stream_),
                          "ncclReduce");
      case BenchOp::Allgather:
        return check_nccl(ncclAllGather(call.in, call.out, call.in_count, type, comm_, stream_),
                          "ncclAllGather");
      case BenchOp::ReduceScatter:
        return check_nccl(ncclReduceScatter(call.in, call.out, call.out_count, type,
                                            nccl_op(call.redop), comm_, stream_),
                          "ncclReduceScatter");
      case BenchOp::Alltoall:
      case BenchOp::Gather:
      case BenchOp::Scatter:
      case BenchOp::Send: return enqueue_grouped(call, type);
      default: break;
    }
    throw Error(ErrorCode::Unsupported,
                "NCCL peer cannot run " + std::string(bench_op_name(call.op)));
  }

  // The ops NCCL has no collective for, as one group of sends and receives (nccl-tests' way).
  void enqueue_grouped(const OpCall& call, ncclDataType_t type) {
    check_nccl(ncclGroupStart(), "ncclGroupStart");
    try {
      switch (call.op) {
        case BenchOp::Alltoall: {
          // Block r of the input goes to rank r; block r of the output comes from rank r.
          const std::size_t block = call.in_count / static_cast<std::size_t>(size_);
          for (int r = 0; r < size_; ++r) {
            const auto at = block * static_cast<std::size_t>(r);
            check_nccl(ncclSend(offset(call.in, at, call.dtype), block, type, r, comm_, stream_),
                       "ncclSend");
            check_nccl(ncclRecv(offset(call.out, at, call.dtype), block, type, r, comm_, stream_),
                       "ncclRecv");
          }
          break;
        }
        case BenchOp::Gather:
          // Every rank (the root included) sends its input; the root receives block r from r.
          if (rank_ == call.root) {
            for (int r = 0; r < size_; ++r) {
              const auto at = call.in_count * static_cast<std::size_t>(r);
              check_nccl(ncclRecv(offset(call.out, at, call.dtype), call.in_count, type, r, comm_,
                                  stream_),
                         "ncclRecv");
            }
          }
          check_nccl(ncclSend(call.in, call.in_count, type, call.root, comm_, stream_), "ncclSend");
          break;
        case BenchOp::Scatter:
          // The root sends block r to rank r; every rank (the root included) receives its block.
          if (rank_ == call.root) {
            for (int r = 0; r < size_; ++r) {
              const auto at = call.out_count * static_cast<std::size_t>(r);
              check_nccl(ncclSend(offset(call.in, at, call.dtype), call.out_count, type, r, comm_,
                                  stream_),
                         "ncclSend");
            }
          }
          check_nccl(ncclRecv(call.out, call.out_count, type, call.root, comm_, stream_),
                     "ncclRecv");
          break;
        default: {
          // sendrecv: a ring, to the next rank and from the previous one, as cohort's row does.
          const int next = (rank_ + 1) % size_;
          const int prev = (rank_ - 1 + size_) % size_;
          check_nccl(ncclSend(call.in, call.in_count, type, next, comm_, stream_), "ncclSend");
          check_nccl(ncclRecv(call.out, call.out_count, type, prev, comm_, stream_), "ncclRecv");
          break;
        }
      }
    } catch (...) {
      ncclGroupEnd();  // the group must be closed; the first error is the one reported
      throw;
    }
    check_nccl(ncclGroupEnd(), "ncclGroupEnd");
  }

  // Polls the stream until it drained, as nccl-tests does: a dead peer shows up as an async
  // error of the communicator, a hang as the deadline passing; either aborts the communicator
  // (ncclCommAbort never waits for peers), so the bench fails instead of hanging.
  void synchronize(const OpCall& call) {
    const auto deadline = Clock::now() + timeout_;
    for (;;) {
      const cudaError_t state = cudaStreamQuery(stream_);
      if (state == cudaSuccess) return;
      if (state != cudaErrorNotReady) check_cuda(state, "cudaStreamQuery");
      ncclResult_t async = ncclSuccess;
      check_nccl(ncclCommGetAsyncError(comm_, &async), "ncclCommGetAsyncError");
      if (async != ncclSuccess && async != ncclInProgress) {
        abort_communicator();
        check_nccl(async, std::string(bench_op_name(call.op)).c_str());
      }
      if (Clock::now() > deadline) {
        abort_communicator();
        throw Error(ErrorCode::Timeout, fmt::format("NCCL peer: {} did not finish within {} ms",
                                                    bench_op_name(call.op), timeout_.count()));
      }
    }
  }

  void abort_communicator() noexcept {
    ncclCommAbort(comm_);
    comm_ = nullptr;
  }

  int rank_, size_;
  std::chrono::milliseconds timeout_;
  cudaStream_t stream_ = nullptr;
  ncclComm_t comm_ = nullptr;
};

}  // namespace

std::unique_ptr<Implementation> make_nccl_peer(std::shared_ptr<cohort::Store> store, int rank,
                                               int size, std::chrono::milliseconds timeout) {
  return std::make_unique<NcclImplementation>(std::move(store), rank, size, timeout);
}

}  // namespace cohort::bench
