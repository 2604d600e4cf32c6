#pragma once

/// Names of the collective algorithms, for forcing a choice per op (CollectiveOptions) or per
/// job (COHORT_ALGO="allreduce:ring,broadcast:tree").

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace cohort {

/// Every operation a communicator runs, by the name users call it with; the one list of
/// collectives (bench, errors, flight records and selection all use it). The first nine are the
/// algorithm families selection chooses for; a v-form runs its family's algorithms
/// (algorithm_family), send and recv run no algorithm.
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
  Allgatherv,
  Gatherv,
  Scatterv,
  Alltoallv,
  Send,
  Recv,
};

/// Number of Collective values (for tables indexed by Collective).
inline constexpr std::size_t kCollectiveCount = 15;

/// The family whose algorithms run `c`: allgatherv -> allgather, gatherv -> gather,
/// scatterv -> scatter, alltoallv -> alltoall; every other value is its own family.
constexpr Collective algorithm_family(Collective c) noexcept {
  switch (c) {
    case Collective::Allgatherv: return Collective::Allgather;
    case Collective::Gatherv: return Collective::Gather;
    case Collective::Scatterv: return Collective::Scatter;
    case Collective::Alltoallv: return Collective::Alltoall;
    default: return c;
  }
}

enum class Algorithm : std::uint8_t {
  Auto,                 ///< let the selection table choose
  Ring,                 ///< allreduce, allgather, reduce_scatter
  RecursiveDoubling,    ///< allreduce, allgather
  Rabenseifner,         ///< allreduce (recursive halving reduce-scatter + doubling allgather)
  Tree,                 ///< binomial tree: broadcast, reduce, gather, scatter
  ScatterAllgather,     ///< broadcast: scatter then ring allgather (large messages)
  ReduceScatterGather,  ///< reduce: ring reduce-scatter then gather to root (large messages)
  Bruck,                ///< allgather, alltoall (small messages)
  RecursiveHalving,     ///< reduce_scatter
  Pairwise,             ///< alltoall
  Dissemination,        ///< barrier
  SharedMemory,         ///< allreduce, broadcast, reduce, allgather, reduce_scatter, barrier:
                        ///< one shared segment, all ranks on one host
  Hierarchical,         ///< allreduce, broadcast, allgather, reduce_scatter, barrier across
                        ///< hosts with several ranks on some: each host's shared segment
                        ///< inside it, messages among one leader per host between them
  /// allreduce, broadcast, reduce, allgather, gather, scatter, reduce_scatter, alltoall on one
  /// host: each rank copies its peers' blocks straight out of their buffers (process_vm_readv),
  /// one copy instead of the arena's two, or works on them in place where they are mappable.
  SingleCopy,
};

/// How many Algorithm values there are (Auto included): they are 0 .. kAlgorithmCount - 1.
inline constexpr int kAlgorithmCount = static_cast<int>(Algorithm::SingleCopy) + 1;

/// The public method's name: "allreduce", "reduce_scatter", "alltoallv", "send", ...
/// (collective_from_name also accepts "reducescatter").
std::string_view collective_name(Collective c) noexcept;
std::optional<Collective> collective_from_name(std::string_view name) noexcept;
/// "auto", "ring", "recursive_doubling", "rabenseifner", "tree", "scatter_allgather",
/// "reduce_scatter_gather", "bruck", "recursive_halving", "pairwise", "dissemination",
/// "shared_memory", "hierarchical", "single_copy".
std::string_view algorithm_name(Algorithm a) noexcept;

/// The algorithms that implement `c`'s family (algorithm_family), in a stable order: what
/// CollectiveOptions::algorithm and COHORT_ALGO accept for it besides Auto. Empty for send and
/// recv. The span refers to static storage.
std::span<const Algorithm> implemented_algorithms(Collective c) noexcept;
std::optional<Algorithm> algorithm_from_name(std::string_view name) noexcept;

}  // namespace cohort
