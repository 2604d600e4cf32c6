// The list of every algorithm. Each descriptor is defined next to its code (<family>/<name>.cpp);
// adding an algorithm adds one entry here.

#include "algorithms/descriptor.hpp"

#include <array>
#include <vector>

namespace cohort::algorithms {

extern const AlgorithmDescriptor allreduce_ring, allreduce_recursive_doubling,
    allreduce_rabenseifner, allreduce_shared_memory, allreduce_hierarchical, broadcast_tree,
    broadcast_scatter_allgather, broadcast_shared_memory, reduce_tree, reduce_reduce_scatter_gather,
    reduce_shared_memory, allgather_ring, allgather_recursive_doubling, allgather_bruck,
    allgather_shared_memory, gather_tree, gather_shared_memory, scatter_tree, scatter_shared_memory,
    reduce_scatter_ring, reduce_scatter_recursive_halving, reduce_scatter_shared_memory,
    alltoall_pairwise, alltoall_bruck, alltoall_shared_memory, barrier_dissemination,
    barrier_shared_memory, broadcast_hierarchical, barrier_hierarchical, allgather_hierarchical,
    reduce_scatter_hierarchical, broadcast_single_copy, allgather_single_copy, gather_single_copy,
    scatter_single_copy, alltoall_single_copy, allreduce_single_copy, reduce_scatter_single_copy,
    reduce_single_copy, reduce_hierarchical;

namespace {

const std::array kAlgorithms{
    &allreduce_ring,
    &allreduce_recursive_doubling,
    &allreduce_rabenseifner,
    &allreduce_shared_memory,
    &allreduce_hierarchical,
    &allreduce_single_copy,
    &broadcast_tree,
    &broadcast_scatter_allgather,
    &broadcast_shared_memory,
    &broadcast_hierarchical,
    &broadcast_single_copy,
    &reduce_tree,
    &reduce_reduce_scatter_gather,
    &reduce_shared_memory,
    &reduce_single_copy,
    &reduce_hierarchical,
    &allgather_ring,
    &allgather_recursive_doubling,
    &allgather_bruck,
    &allgather_shared_memory,
    &allgather_hierarchical,
    &allgather_single_copy,
    &gather_tree,
    &gather_shared_memory,
    &gather_single_copy,
    &scatter_tree,
    &scatter_shared_memory,
    &scatter_single_copy,
    &reduce_scatter_ring,
    &reduce_scatter_recursive_halving,
    &reduce_scatter_shared_memory,
    &reduce_scatter_hierarchical,
    &reduce_scatter_single_copy,
    &alltoall_pairwise,
    &alltoall_bruck,
    &alltoall_shared_memory,
    &alltoall_single_copy,
    &barrier_dissemination,
    &barrier_shared_memory,
    &barrier_hierarchical,
};

}  // namespace

std::span<const AlgorithmDescriptor* const> all_algorithms() noexcept {
  return kAlgorithms;
}

const AlgorithmDescriptor* find_algorithm(Collective family, Algorithm algorithm) noexcept {
  // Indexed once, so the lookup every collective makes per candidate is one load, not a scan of
  // the whole list.
  using ByAlgorithm = std::array<const AlgorithmDescriptor*, kAlgorithmCount>;
  static const std::array<ByAlgorithm, kCollectiveCount> index = [] {
    std::array<ByAlgorithm, kCollectiveCount> table{};
    for (const AlgorithmDescriptor* d : kAlgorithms)
      table[static_cast<std::size_t>(d->family)][static_cast<std::size_t>(d->algorithm)] = d;
    return table;
  }();
  const auto f = static_cast<std::size_t>(family);
  const auto a = static_cast<std::size_t>(algorithm);
  return f < index.size() && a < index[f].size() ? index[f][a] : nullptr;
}

}  // namespace cohort::algorithms

namespace cohort {

std::span<const Algorithm> implemented_algorithms(Collective c) noexcept {
  // Built once from the descriptor list; indexed by family.
  static const auto by_family = [] {
    std::array<std::vector<Algorithm>, kCollectiveCount> table;
    for (const algorithms::AlgorithmDescriptor* d : algorithms::all_algorithms())
      table[static_cast<std::size_t>(d->family)].push_back(d->algorithm);
    return table;
  }();
  const auto index = static_cast<std::size_t>(algorithm_family(c));
  return index < by_family.size() ? std::span<const Algorithm>(by_family[index])
                                  : std::span<const Algorithm>();
}

}  // namespace cohort
