#pragma once

/// Names of the collective algorithms, for forcing a choice per op (CollectiveOptions) or per
/// job (COHORT_ALGO="allreduce:ring,broadcast:tree").

#include <cstdint>
#include <optional>
#include <string_view>

namespace cohort {

enum class Collective : std::uint8_t {
  Allreduce,
  Broadcast,
  Reduce,
  Allgather,
  Gather,
  Scatter,
  ReduceScatter,
  Alltoall,
  Barrier,
};

enum class Algorithm : std::uint8_t {
  Auto,               ///< let the selection table choose
  Ring,               ///< allreduce, allgather, reduce_scatter
  RecursiveDoubling,  ///< allreduce, allgather
  Rabenseifner,       ///< allreduce (recursive halving reduce-scatter + doubling allgather)
  Tree,               ///< binomial tree: broadcast, reduce, gather, scatter
  ScatterAllgather,   ///< broadcast: scatter then ring allgather (large messages)
  ReduceScatterGather,///< reduce: ring reduce-scatter then gather to root (large messages)
  Bruck,              ///< allgather, alltoall (small messages)
  RecursiveHalving,   ///< reduce_scatter
  Pairwise,           ///< alltoall
  Dissemination,      ///< barrier
  SharedMemory,       ///< allreduce, broadcast, reduce, allgather, reduce_scatter, barrier:
                      ///< one shared segment, all ranks on one host
};

/// "allreduce", "broadcast", ... (also accepts "reduce_scatter" / "reducescatter").
std::string_view collective_name(Collective c) noexcept;
std::optional<Collective> collective_from_name(std::string_view name) noexcept;
/// "auto", "ring", "recursive_doubling", "rabenseifner", "tree", "scatter_allgather",
/// "reduce_scatter_gather", "bruck", "recursive_halving", "pairwise", "dissemination",
/// "shared_memory".
std::string_view algorithm_name(Algorithm a) noexcept;
std::optional<Algorithm> algorithm_from_name(std::string_view name) noexcept;

}  // namespace cohort
