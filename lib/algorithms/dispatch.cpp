// run_* entry points: candidates from selection, first one that accepts runs.

#include "algorithms/dispatch.hpp"

#include <cohort/error.hpp>

#include "algorithms/implementations.hpp"
#include "algorithms/selection.hpp"
#include "core/log.hpp"

#include <numeric>
#include <string>

namespace cohort::algorithms {
namespace {

template <class Args>
using Implementation = bool (*)(const OpContext&, const Args&);

struct NoArgs {};

bool barrier_dissemination_entry(const OpContext& ctx, const NoArgs&) {
  return barrier_dissemination(ctx);
}
bool barrier_shared_memory_entry(const OpContext& ctx, const NoArgs&) {
  return barrier_shared_memory(ctx);
}

Implementation<AllreduceArgs> allreduce_impl(Algorithm a) {
  switch (a) {
    case Algorithm::Ring:
      return allreduce_ring;
    case Algorithm::RecursiveDoubling:
      return allreduce_recursive_doubling;
    case Algorithm::Rabenseifner:
      return allreduce_rabenseifner;
    case Algorithm::SharedMemory:
      return allreduce_shared_memory;
    default:
      return nullptr;
  }
}
Implementation<BroadcastArgs> broadcast_impl(Algorithm a) {
  switch (a) {
    case Algorithm::Tree:
      return broadcast_tree;
    case Algorithm::ScatterAllgather:
      return broadcast_scatter_allgather;
    case Algorithm::SharedMemory:
      return broadcast_shared_memory;
    default:
      return nullptr;
  }
}
Implementation<ReduceArgs> reduce_impl(Algorithm a) {
  switch (a) {
    case Algorithm::Tree:
      return reduce_tree;
    case Algorithm::ReduceScatterGather:
      return reduce_reduce_scatter_gather;
    case Algorithm::SharedMemory:
      return reduce_shared_memory;
    default:
      return nullptr;
  }
}
Implementation<AllgatherArgs> allgather_impl(Algorithm a) {
  switch (a) {
    case Algorithm::Ring:
      return allgather_ring;
    case Algorithm::RecursiveDoubling:
      return allgather_recursive_doubling;
    case Algorithm::Bruck:
      return allgather_bruck;
    case Algorithm::SharedMemory:
      return allgather_shared_memory;
    default:
      return nullptr;
  }
}
Implementation<GatherArgs> gather_impl(Algorithm a) {
  switch (a) {
    case Algorithm::Tree:
      return gather_tree;
    case Algorithm::SharedMemory:
      return gather_shared_memory;
    default:
      return nullptr;
  }
}
Implementation<ScatterArgs> scatter_impl(Algorithm a) {
  switch (a) {
    case Algorithm::Tree:
      return scatter_tree;
    case Algorithm::SharedMemory:
      return scatter_shared_memory;
    default:
      return nullptr;
  }
}
Implementation<ReduceScatterArgs> reduce_scatter_impl(Algorithm a) {
  switch (a) {
    case Algorithm::Ring:
      return reduce_scatter_ring;
    case Algorithm::RecursiveHalving:
      return reduce_scatter_recursive_halving;
    case Algorithm::SharedMemory:
      return reduce_scatter_shared_memory;
    default:
      return nullptr;
  }
}
Implementation<AlltoallArgs> alltoall_impl(Algorithm a) {
  switch (a) {
    case Algorithm::Pairwise:
      return alltoall_pairwise;
    case Algorithm::Bruck:
      return alltoall_bruck;
    case Algorithm::SharedMemory:
      return alltoall_shared_memory;
    default:
      return nullptr;
  }
}
Implementation<NoArgs> barrier_impl(Algorithm a) {
  switch (a) {
    case Algorithm::Dissemination:
      return barrier_dissemination_entry;
    case Algorithm::SharedMemory:
      return barrier_shared_memory_entry;
    default:
      return nullptr;
  }
}

/// ctx.what without a trailing " (<algorithm>)" the caller may have added ("allreduce #17 (auto)"),
/// so the name of the algorithm actually running replaces it.
std::string op_name(const std::string& what) {
  const auto open = what.rfind(" (");
  if (open == std::string::npos || what.back() != ')') return what;
  const std::string_view inside(what.data() + open + 2, what.size() - open - 3);
  return algorithm_from_name(inside) ? what.substr(0, open) : what;
}

/// `message` with the first mention of the op (`what`, possibly carrying a stale " (<algo>)")
/// naming `algorithm` instead; prefixed with it when the message does not mention the op.
std::string with_algorithm(const std::string& message, const std::string& what,
                           Algorithm algorithm) {
  const std::string name = op_name(what);
  const std::string named = name + " (" + std::string(algorithm_name(algorithm)) + ")";
  const auto at = message.find(what);
  if (at != std::string::npos)
    return message.substr(0, at) + named + message.substr(at + what.size());
  return named + ": " + message;
}

/// Tries the candidates in order; returns the one that ran.
template <class Args>
Algorithm run_first_accepting(const OpContext& ctx, Collective collective, std::size_t bytes,
                              Algorithm forced, const Args& args,
                              Implementation<Args> (*lookup)(Algorithm)) {
  const auto candidates =
      select_candidates(collective, bytes, ctx.size, forced, environment_algorithm_overrides());
  for (Algorithm algorithm : candidates) {
    const Implementation<Args> implementation = lookup(algorithm);
    if (implementation == nullptr)
      throw Error(ErrorCode::Internal, std::string(algorithm_name(algorithm)) + " is listed for " +
                                           std::string(collective_name(collective)) +
                                           " but has no implementation");
    bool accepted = false;
    try {
      accepted = implementation(ctx, args);
    } catch (const Error& e) {
      // Errors name the algorithm that was running ("allreduce #17 (ring)"); the string is
      // built only here, never on the success path of a small collective.
      throw Error(e.code(), with_algorithm(e.message(), ctx.what, algorithm));
    }
    if (accepted) {
      COHORT_LOG_DEBUG("{}: {} bytes on {} ranks ran {}", ctx.what, bytes, ctx.size,
                       algorithm_name(algorithm));
      return algorithm;
    }
    COHORT_LOG_DEBUG("{}: {} declined {} bytes on {} ranks", ctx.what, algorithm_name(algorithm),
                     bytes, ctx.size);
  }
  throw Error(ErrorCode::Internal, ctx.what + ": every candidate algorithm declined " +
                                       std::to_string(bytes) + " bytes on " +
                                       std::to_string(ctx.size) + " ranks");
}

std::size_t total_bytes(std::span<const std::size_t> counts, DType dtype) {
  return std::accumulate(counts.begin(), counts.end(), std::size_t{0}) * dtype_size(dtype);
}

}  // namespace

Algorithm run_allreduce(const OpContext& ctx, const AllreduceArgs& args, Algorithm forced) {
  return run_first_accepting(ctx, Collective::Allreduce, args.count * dtype_size(args.dtype),
                             forced, args, allreduce_impl);
}

Algorithm run_broadcast(const OpContext& ctx, const BroadcastArgs& args, Algorithm forced) {
  return run_first_accepting(ctx, Collective::Broadcast, args.count * dtype_size(args.dtype),
                             forced, args, broadcast_impl);
}

Algorithm run_reduce(const OpContext& ctx, const ReduceArgs& args, Algorithm forced) {
  return run_first_accepting(ctx, Collective::Reduce, args.count * dtype_size(args.dtype), forced,
                             args, reduce_impl);
}

Algorithm run_allgather(const OpContext& ctx, const AllgatherArgs& args, Algorithm forced) {
  return run_first_accepting(ctx, Collective::Allgather, total_bytes(args.counts, args.dtype),
                             forced, args, allgather_impl);
}

Algorithm run_gather(const OpContext& ctx, const GatherArgs& args, Algorithm forced) {
  return run_first_accepting(ctx, Collective::Gather, total_bytes(args.counts, args.dtype), forced,
                             args, gather_impl);
}

Algorithm run_scatter(const OpContext& ctx, const ScatterArgs& args, Algorithm forced) {
  return run_first_accepting(ctx, Collective::Scatter, total_bytes(args.counts, args.dtype), forced,
                             args, scatter_impl);
}

Algorithm run_reduce_scatter(const OpContext& ctx, const ReduceScatterArgs& args,
                             Algorithm forced) {
  const std::size_t bytes =
      static_cast<std::size_t>(ctx.size) * args.count * dtype_size(args.dtype);
  return run_first_accepting(ctx, Collective::ReduceScatter, bytes, forced, args,
                             reduce_scatter_impl);
}

Algorithm run_alltoall(const OpContext& ctx, const AlltoallArgs& args, Algorithm forced) {
  // alltoallv counts differ per rank: they must not steer a choice every rank has to agree on.
  const std::size_t bytes =
      args.uniform ? total_bytes(args.send_counts, args.dtype) : kUnknownBytes;
  return run_first_accepting(ctx, Collective::Alltoall, bytes, forced, args, alltoall_impl);
}

Algorithm run_barrier(const OpContext& ctx, Algorithm forced) {
  return run_first_accepting(ctx, Collective::Barrier, 0, forced, NoArgs{}, barrier_impl);
}

}  // namespace cohort::algorithms
