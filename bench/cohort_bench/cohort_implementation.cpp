#include "cohort_implementation.hpp"

#include <cohort/buffer.hpp>

namespace cohort::bench {

CohortImplementation::CohortImplementation(std::shared_ptr<Communicator> comm)
    : comm_(std::move(comm)) {}

std::optional<std::string> CohortImplementation::unsupported(const OpCall& call) const {
  if (op_reduces(call.op) && !reduce_op_supports(call.redop, call.dtype)) {
    return "cohort has no " + std::string(reduce_op_name(call.redop)) + " for " +
           std::string(dtype_name(call.dtype));
  }
  // On CUDA buffers cohort runs NCCL, which has no integer average (cohort refuses it there).
  if (call.device.type == DeviceType::CUDA && op_reduces(call.op) && call.redop == ReduceOp::Avg &&
      !dtype_is_floating(call.dtype)) {
    return "cohort has no avg for " + std::string(dtype_name(call.dtype)) + " on CUDA buffers";
  }
  if (call.op == BenchOp::Send && comm_->size() < 2) {
    return "cohort's point-to-point needs another rank";  // a world of one has no peer
  }
  return std::nullopt;
}

const Buffer& CohortImplementation::view_of(Buffer& cached, void* data, std::size_t count,
                                            DType dtype, Device device) {
  if (cached.data() != data || cached.count() != count || cached.dtype() != dtype ||
      cached.device() != device)
    cached = Buffer::view(data, count, dtype, device);
  return cached;
}

void CohortImplementation::run(const OpCall& call) {
  const Buffer& in = view_of(in_, call.in, call.in_count, call.dtype, call.device);
  const Buffer& out = view_of(out_, call.out, call.out_count, call.dtype, call.device);
  CollectiveOptions options;
  options.algorithm = call.algorithm;
  Communicator& comm = *comm_;
  switch (call.op) {
    case BenchOp::Allreduce: return comm.allreduce(in, out, call.redop, options);
    case BenchOp::Broadcast: return comm.broadcast(in, out, call.root, options);
    case BenchOp::Reduce: return comm.reduce(in, out, call.redop, call.root, options);
    case BenchOp::Allgather: return comm.allgather(in, out, options);
    case BenchOp::ReduceScatter: return comm.reduce_scatter(in, out, call.redop, options);
    case BenchOp::Alltoall: return comm.alltoall(in, out, options);
    case BenchOp::Gather: return comm.gather(in, out, call.root, options);
    case BenchOp::Scatter: return comm.scatter(in, out, call.root, options);
    case BenchOp::Barrier: return comm.barrier(options);
    case BenchOp::Send: {
      // Ring exchange as in nccl-tests and MPI_Sendrecv: send to the next rank, receive from the
      // previous one, both posted before either is waited on.
      const int n = comm.size();
      return comm.sendrecv(in, (comm.rank() + 1) % n, out, (comm.rank() - 1 + n) % n, 0, options);
    }
    default:  // not bench ops: kAllBenchOps never holds them
      break;
  }
}

}  // namespace cohort::bench
