#pragma once

// Every algorithm, one file each (named <collective>_<algorithm>.cpp). Each returns false,
// having moved no data, when it declines the arguments; the decision depends only on values
// every rank agrees on (world size, counts, dtype), so all ranks decline together and the
// dispatcher falls through to the same next candidate everywhere.

#include "algorithms/args.hpp"
#include "algorithms/op_context.hpp"

namespace cohort::algorithms {

bool allreduce_ring(const OpContext& ctx, const AllreduceArgs& args);
bool allreduce_recursive_doubling(const OpContext& ctx, const AllreduceArgs& args);
bool allreduce_rabenseifner(const OpContext& ctx, const AllreduceArgs& args);
bool allreduce_shared_memory(const OpContext& ctx, const AllreduceArgs& args);

bool broadcast_tree(const OpContext& ctx, const BroadcastArgs& args);
bool broadcast_scatter_allgather(const OpContext& ctx, const BroadcastArgs& args);
/// The *_shared_memory algorithms decline without a shared arena (ranks on several hosts, or
/// COHORT_SHARED_MEMORY=off) on more than one rank.
bool broadcast_shared_memory(const OpContext& ctx, const BroadcastArgs& args);

bool reduce_tree(const OpContext& ctx, const ReduceArgs& args);
bool reduce_reduce_scatter_gather(const OpContext& ctx, const ReduceArgs& args);
bool reduce_shared_memory(const OpContext& ctx, const ReduceArgs& args);

bool allgather_ring(const OpContext& ctx, const AllgatherArgs& args);
/// Declines unless the world size is a power of two.
bool allgather_recursive_doubling(const OpContext& ctx, const AllgatherArgs& args);
bool allgather_bruck(const OpContext& ctx, const AllgatherArgs& args);
bool allgather_shared_memory(const OpContext& ctx, const AllgatherArgs& args);

bool gather_tree(const OpContext& ctx, const GatherArgs& args);
bool gather_shared_memory(const OpContext& ctx, const GatherArgs& args);
bool scatter_tree(const OpContext& ctx, const ScatterArgs& args);
bool scatter_shared_memory(const OpContext& ctx, const ScatterArgs& args);

bool reduce_scatter_ring(const OpContext& ctx, const ReduceScatterArgs& args);
bool reduce_scatter_recursive_halving(const OpContext& ctx, const ReduceScatterArgs& args);
bool reduce_scatter_shared_memory(const OpContext& ctx, const ReduceScatterArgs& args);

bool alltoall_pairwise(const OpContext& ctx, const AlltoallArgs& args);
/// Declines alltoallv (args.uniform false).
bool alltoall_bruck(const OpContext& ctx, const AlltoallArgs& args);
bool alltoall_shared_memory(const OpContext& ctx, const AlltoallArgs& args);

bool barrier_dissemination(const OpContext& ctx);
bool barrier_shared_memory(const OpContext& ctx);

}  // namespace cohort::algorithms
