#include "ops.hpp"

#include <algorithm>
#include <array>
#include <utility>

namespace cohort::bench {
namespace {

constexpr std::array<std::pair<BenchOp, std::string_view>, 10> kOpNames = {{
    {BenchOp::Allreduce, "allreduce"},
    {BenchOp::Broadcast, "broadcast"},
    {BenchOp::Reduce, "reduce"},
    {BenchOp::Allgather, "allgather"},
    {BenchOp::ReduceScatter, "reduce_scatter"},
    {BenchOp::Alltoall, "alltoall"},
    {BenchOp::Gather, "gather"},
    {BenchOp::Scatter, "scatter"},
    {BenchOp::Sendrecv, "sendrecv"},
    {BenchOp::Barrier, "barrier"},
}};

// The algorithm lists mirror the documentation of cohort::Algorithm (include/cohort/algorithm.hpp).
constexpr Algorithm kAllreduceAlgos[] = {Algorithm::Ring, Algorithm::RecursiveDoubling,
                                         Algorithm::Rabenseifner, Algorithm::SharedMemory};
constexpr Algorithm kBroadcastAlgos[] = {Algorithm::Tree, Algorithm::ScatterAllgather,
                                         Algorithm::SharedMemory};
constexpr Algorithm kReduceAlgos[] = {Algorithm::Tree, Algorithm::ReduceScatterGather,
                                      Algorithm::SharedMemory};
constexpr Algorithm kAllgatherAlgos[] = {Algorithm::Ring, Algorithm::RecursiveDoubling,
                                         Algorithm::Bruck, Algorithm::SharedMemory};
constexpr Algorithm kReduceScatterAlgos[] = {Algorithm::Ring, Algorithm::RecursiveHalving,
                                             Algorithm::SharedMemory};
constexpr Algorithm kAlltoallAlgos[] = {Algorithm::Bruck, Algorithm::Pairwise};
constexpr Algorithm kTreeAlgos[] = {Algorithm::Tree};
constexpr Algorithm kBarrierAlgos[] = {Algorithm::Dissemination, Algorithm::SharedMemory};

}  // namespace

std::string_view bench_op_name(BenchOp op) noexcept {
  for (const auto& [value, name] : kOpNames) {
    if (value == op) return name;
  }
  return "unknown";
}

std::optional<BenchOp> bench_op_from_name(std::string_view name) noexcept {
  if (name == "reducescatter") return BenchOp::ReduceScatter;
  for (const auto& [value, text] : kOpNames) {
    if (text == name) return value;
  }
  return std::nullopt;
}

bool op_reduces(BenchOp op) noexcept {
  return op == BenchOp::Allreduce || op == BenchOp::Reduce || op == BenchOp::ReduceScatter;
}

bool op_has_root(BenchOp op) noexcept {
  return op == BenchOp::Broadcast || op == BenchOp::Reduce || op == BenchOp::Gather ||
         op == BenchOp::Scatter;
}

bool op_has_in_place(BenchOp op) noexcept {
  return op != BenchOp::Sendrecv && op != BenchOp::Barrier;
}

bool op_moves_data(BenchOp op) noexcept {
  return op != BenchOp::Barrier;
}

double busbw_factor(BenchOp op, int world_size) noexcept {
  const double n = world_size;
  switch (op) {
    case BenchOp::Allreduce:
      return 2.0 * (n - 1.0) / n;
    case BenchOp::Allgather:
    case BenchOp::ReduceScatter:
    case BenchOp::Alltoall:
    case BenchOp::Gather:
    case BenchOp::Scatter:
      return (n - 1.0) / n;
    case BenchOp::Broadcast:
    case BenchOp::Reduce:
    case BenchOp::Sendrecv:
      return 1.0;
    case BenchOp::Barrier:
      return 0.0;
  }
  return 0.0;
}

std::optional<Collective> op_collective(BenchOp op) noexcept {
  switch (op) {
    case BenchOp::Allreduce:
      return Collective::Allreduce;
    case BenchOp::Broadcast:
      return Collective::Broadcast;
    case BenchOp::Reduce:
      return Collective::Reduce;
    case BenchOp::Allgather:
      return Collective::Allgather;
    case BenchOp::ReduceScatter:
      return Collective::ReduceScatter;
    case BenchOp::Alltoall:
      return Collective::Alltoall;
    case BenchOp::Gather:
      return Collective::Gather;
    case BenchOp::Scatter:
      return Collective::Scatter;
    case BenchOp::Barrier:
      return Collective::Barrier;
    case BenchOp::Sendrecv:
      return std::nullopt;
  }
  return std::nullopt;
}

std::span<const Algorithm> op_algorithms(BenchOp op) noexcept {
  switch (op) {
    case BenchOp::Allreduce:
      return kAllreduceAlgos;
    case BenchOp::Broadcast:
      return kBroadcastAlgos;
    case BenchOp::Reduce:
      return kReduceAlgos;
    case BenchOp::Allgather:
      return kAllgatherAlgos;
    case BenchOp::ReduceScatter:
      return kReduceScatterAlgos;
    case BenchOp::Alltoall:
      return kAlltoallAlgos;
    case BenchOp::Gather:
    case BenchOp::Scatter:
      return kTreeAlgos;
    case BenchOp::Barrier:
      return kBarrierAlgos;
    case BenchOp::Sendrecv:
      return {};
  }
  return {};
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
    case BenchOp::Sendrecv: {
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
      break;
  }
  s.size_bytes = s.count * element_size;
  return s;
}

}  // namespace cohort::bench
