#pragma once

// The collectives cohort-bench measures, with the facts the sweep, the table and the check need
// about each: its name, whether it reduces or has a root, its nccl-tests bus-bandwidth factor,
// which cohort algorithms apply to it, and how a swept byte size becomes buffer counts.

#include <cohort/algorithm.hpp>

#include <cstddef>
#include <optional>
#include <span>
#include <string_view>

namespace cohort::bench {

/// The bench measures cohort's own collectives; Send stands for a send/recv pair ("sendrecv").
using BenchOp = Collective;

/// Every op, in the order `--op all` runs them.
inline constexpr BenchOp kAllBenchOps[] = {
    BenchOp::Allreduce,     BenchOp::Broadcast, BenchOp::Reduce, BenchOp::Allgather,
    BenchOp::ReduceScatter, BenchOp::Alltoall,  BenchOp::Gather, BenchOp::Scatter,
    BenchOp::Send,          BenchOp::Barrier};

/// "allreduce", "broadcast", "reduce", "allgather", "reduce_scatter", "alltoall", "gather",
/// "scatter", "sendrecv", "barrier".
std::string_view bench_op_name(BenchOp op) noexcept;
std::optional<BenchOp> bench_op_from_name(std::string_view name) noexcept;

/// The op combines values with a ReduceOp (allreduce, reduce, reduce_scatter).
bool op_reduces(BenchOp op) noexcept;
/// The op has a root rank (broadcast, reduce, gather, scatter).
bool op_has_root(BenchOp op) noexcept;
/// The op has an in-place form worth timing (all but sendrecv and barrier).
bool op_has_in_place(BenchOp op) noexcept;
/// The op moves data (all but barrier, which is reported by time only).
bool op_moves_data(BenchOp op) noexcept;

/// nccl-tests' bus-bandwidth factor for `world_size` ranks: busbw = algbw * factor.
/// allreduce 2(n-1)/n; allgather, reduce_scatter, alltoall, gather, scatter (n-1)/n;
/// broadcast, reduce, sendrecv 1; barrier 0 (it moves no payload).
double busbw_factor(BenchOp op, int world_size) noexcept;

/// The cohort collective behind the op; none for sendrecv (point-to-point).
std::optional<Collective> op_collective(BenchOp op) noexcept;
/// The cohort algorithms documented as implementing the op (for --algos all); empty for
/// sendrecv.
std::span<const Algorithm> op_algorithms(BenchOp op) noexcept;
/// Whether `algorithm` is one of op_algorithms(op) (Auto always applies).
bool algorithm_applies(BenchOp op, Algorithm algorithm) noexcept;

/// How one swept size maps onto buffers, with nccl-tests' size semantics: the size is the
/// largest buffer a rank touches (allgather and gather: the gathered output; reduce_scatter,
/// scatter and alltoall: the full input), rounded down so that it splits evenly over ranks.
struct OpShape {
  std::size_t size_bytes = 0;  ///< the size reported in the table after rounding
  std::size_t count = 0;       ///< size_bytes / element size (nccl-tests' count column)
  std::size_t in_count = 0;    ///< elements of the input buffer
  std::size_t out_count = 0;   ///< elements of the output buffer
  /// In-place form: one buffer of inplace_count elements; the input starts at in_offset and the
  /// output at out_offset (elements). Meaningless when !op_has_in_place(op).
  std::size_t inplace_count = 0;
  std::size_t in_offset = 0;
  std::size_t out_offset = 0;
};

/// The shape of `op` at `requested_bytes` for rank `rank` of `world_size`. `element_size` > 0.
OpShape op_shape(BenchOp op, std::size_t requested_bytes, std::size_t element_size, int world_size,
                 int rank);

}  // namespace cohort::bench
