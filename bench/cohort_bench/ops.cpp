#include "ops.hpp"

#include <algorithm>
#include <array>
#include <utility>

namespace cohort::bench {

std::string_view bench_op_name(BenchOp op) noexcept {
  // nccl-tests' name for the point-to-point test; every other op is named as in the API.
  return op == BenchOp::Send ? std::string_view("sendrecv") : collective_name(op);
}

std::optional<BenchOp> bench_op_from_name(std::string_view name) noexcept {
  if (name == "sendrecv") return BenchOp::Send;
  const auto op = collective_from_name(name);
  if (!op ||
      std::find(std::begin(kAllBenchOps), std::end(kAllBenchOps), *op) == std::end(kAllBenchOps))
    return std::nullopt;
  return op;
}

bool op_reduces(BenchOp op) noexcept {
  return op == BenchOp::Allreduce || op == BenchOp::Reduce || op == BenchOp::ReduceScatter;
}

bool op_has_root(BenchOp op) noexcept {
  return op == BenchOp::Broadcast || op == BenchOp::Reduce || op == BenchOp::Gather ||
         op == BenchOp::Scatter;
}

bool op_has_in_place(BenchOp op) noexcept {
  return op != BenchOp::Send && op != BenchOp::Barrier;
}

bool op_moves_data(BenchOp op) noexcept {
  return op != BenchOp::Barrier;
}

double busbw_factor(BenchOp op, int world_size) noexcept {
  const double n = world_size;
  switch (op) {
    case BenchOp::Allreduce: return 2.0 * (n - 1.0) / n;
    case BenchOp::Allgather:
    case BenchOp::ReduceScatter:
    case BenchOp::Alltoall:
    case BenchOp::Gather:
    case BenchOp::Scatter: return (n - 1.0) / n;
    case BenchOp::Broadcast:
    case BenchOp::Reduce:
    case BenchOp::Send: return 1.0;
    case BenchOp::Barrier: return 0.0;
    default: return 0.0;  // not a bench op
  }
}

std::optional<Collective> op_collective(BenchOp op) noexcept {
  if (op == BenchOp::Send) return std::nullopt;
  return op;
}

std::span<const Algorithm> op_algorithms(BenchOp op) noexcept {
  return implemented_algorithms(op);
}

bool algorithm_applies(BenchOp op, Algorithm algorithm) noexcept {
  if (algorithm == Algorithm::Auto) return true;
  const auto algos = op_algorithms(op);
  return std::find(algos.begin(), algos.end(), algorithm) != algos.end();
}

OpShape op_shape(BenchOp op, std::size_t requested_bytes, std::size_t element_size, int world_size,
                 int rank) {
  const auto ws = static_cast<std::size_t>(world_size);
  const auto r = static_cast<std::size_t>(rank);
  OpShape s;
  switch (op) {
    case BenchOp::Allreduce:
    case BenchOp::Broadcast:
    case BenchOp::Reduce:
    case BenchOp::Send: {
      // One buffer of `count` elements on each side.
      s.count = requested_bytes / element_size;
      s.in_count = s.out_count = s.inplace_count = s.count;
      break;
    }
    case BenchOp::Allgather:
    case BenchOp::Gather: {
      // The size is the gathered output; each rank contributes size / ws.
      const std::size_t per_rank = requested_bytes / element_size / ws;
      s.count = per_rank * ws;
      s.in_count = per_rank;
      s.out_count = s.inplace_count = s.count;
      s.in_offset = r * per_rank;
      break;
    }
    case BenchOp::ReduceScatter:
    case BenchOp::Scatter: {
      // The size is the full input; each rank receives size / ws.
      const std::size_t per_rank = requested_bytes / element_size / ws;
      s.count = per_rank * ws;
      s.in_count = s.inplace_count = s.count;
      s.out_count = per_rank;
      s.out_offset = r * per_rank;
      break;
    }
    case BenchOp::Alltoall: {
      // Every rank sends size / ws to each rank (itself included).
      const std::size_t per_rank = requested_bytes / element_size / ws;
      s.count = per_rank * ws;
      s.in_count = s.out_count = s.inplace_count = s.count;
      break;
    }
    case BenchOp::Barrier:
    default:  // not bench ops
      break;
  }
  s.size_bytes = s.count * element_size;
  return s;
}

}  // namespace cohort::bench
