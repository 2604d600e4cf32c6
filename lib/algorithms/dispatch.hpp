#pragma once

// Entry points the communicator calls. Each picks an algorithm — the op's forced choice, else
// COHORT_ALGO, else the selection table keyed by (bytes, world size) — skips any that decline
// the arguments, runs the first that accepts, and returns which one ran (logged at debug level).

#include <cohort/algorithm.hpp>

#include "algorithms/args.hpp"
#include "algorithms/op_context.hpp"

namespace cohort::algorithms {

Algorithm run_allreduce(const OpContext& ctx, const AllreduceArgs& args, Algorithm forced);
Algorithm run_broadcast(const OpContext& ctx, const BroadcastArgs& args, Algorithm forced);
Algorithm run_reduce(const OpContext& ctx, const ReduceArgs& args, Algorithm forced);
Algorithm run_allgather(const OpContext& ctx, const AllgatherArgs& args, Algorithm forced);
Algorithm run_gather(const OpContext& ctx, const GatherArgs& args, Algorithm forced);
Algorithm run_scatter(const OpContext& ctx, const ScatterArgs& args, Algorithm forced);
Algorithm run_reduce_scatter(const OpContext& ctx, const ReduceScatterArgs& args,
                             Algorithm forced);
Algorithm run_alltoall(const OpContext& ctx, const AlltoallArgs& args, Algorithm forced);
Algorithm run_barrier(const OpContext& ctx, Algorithm forced);

}  // namespace cohort::algorithms
