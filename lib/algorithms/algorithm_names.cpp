// Name tables for Collective and Algorithm (COHORT_ALGO, CollectiveOptions, cohort-bench).

#include <cohort/algorithm.hpp>

#include <array>
#include <utility>

namespace cohort {
namespace {

constexpr std::array<std::pair<Collective, std::string_view>, kCollectiveCount> kCollectiveNames{{
    {Collective::Allreduce, "allreduce"},
    {Collective::Broadcast, "broadcast"},
    {Collective::Reduce, "reduce"},
    {Collective::Allgather, "allgather"},
    {Collective::Gather, "gather"},
    {Collective::Scatter, "scatter"},
    {Collective::ReduceScatter, "reduce_scatter"},
    {Collective::Alltoall, "alltoall"},
    {Collective::Barrier, "barrier"},
    {Collective::Allgatherv, "allgatherv"},
    {Collective::Gatherv, "gatherv"},
    {Collective::Scatterv, "scatterv"},
    {Collective::Alltoallv, "alltoallv"},
    {Collective::Send, "send"},
    {Collective::Recv, "recv"},
}};

constexpr std::array<std::pair<Algorithm, std::string_view>, kAlgorithmCount> kAlgorithmNames{{
    {Algorithm::Auto, "auto"},
    {Algorithm::Ring, "ring"},
    {Algorithm::RecursiveDoubling, "recursive_doubling"},
    {Algorithm::Rabenseifner, "rabenseifner"},
    {Algorithm::Tree, "tree"},
    {Algorithm::ScatterAllgather, "scatter_allgather"},
    {Algorithm::ReduceScatterGather, "reduce_scatter_gather"},
    {Algorithm::Bruck, "bruck"},
    {Algorithm::RecursiveHalving, "recursive_halving"},
    {Algorithm::Pairwise, "pairwise"},
    {Algorithm::Dissemination, "dissemination"},
    {Algorithm::SharedMemory, "shared_memory"},
    {Algorithm::Hierarchical, "hierarchical"},
    {Algorithm::SingleCopy, "single_copy"},
}};

}  // namespace

std::string_view collective_name(Collective c) noexcept {
  for (const auto& [value, name] : kCollectiveNames)
    if (value == c) return name;
  return "unknown";
}

std::optional<Collective> collective_from_name(std::string_view name) noexcept {
  if (name == "reducescatter") return Collective::ReduceScatter;
  for (const auto& [value, spelled] : kCollectiveNames)
    if (spelled == name) return value;
  return std::nullopt;
}

std::string_view algorithm_name(Algorithm a) noexcept {
  for (const auto& [value, name] : kAlgorithmNames)
    if (value == a) return name;
  return "unknown";
}

std::optional<Algorithm> algorithm_from_name(std::string_view name) noexcept {
  for (const auto& [value, spelled] : kAlgorithmNames)
    if (spelled == name) return value;
  return std::nullopt;
}

}  // namespace cohort
