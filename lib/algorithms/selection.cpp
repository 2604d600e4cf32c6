// The selection table and the COHORT_ALGO parser (see selection.hpp).

#include "algorithms/selection.hpp"

#include <cohort/error.hpp>

#include "algorithms/descriptor.hpp"
#include "core/tunables.hpp"
#include "patterns/binomial_tree.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <string>

namespace cohort::algorithms {
namespace {

using A = Algorithm;
using C = Collective;
using W = WorldSizeCondition;
constexpr A kEnd = A::Auto;

// First matching rule wins, so narrower rules (world-size limits) precede catch-alls.
constexpr SelectionRule kTable[] = {
    // allreduce: latency-bound -> recursive doubling; middle -> Rabenseifner; large -> ring.
    // Shared memory first whenever every rank is on one host (it declines otherwise).
    {C::Allreduce,
     0,
     kAllreduceLatencyMaxBytes,
     1,
     W::Any,
     {A::SharedMemory, A::Hierarchical, A::RecursiveDoubling, A::Ring}},
    {C::Allreduce,
     kAllreduceLatencyMaxBytes,
     kAllreduceHalvingMaxBytes,
     1,
     W::Any,
     {A::SharedMemory, A::Hierarchical, A::Rabenseifner, A::Ring}},
    // On 2 ranks of one host, 4-16 MiB: single copy where the kernel allows it.
    {C::Allreduce,
     kAllreduceSingleCopyTwoRanksMinBytes,
     kAllreduceSingleCopyTwoRanksMaxBytes,
     2,
     W::Any,
     {A::SingleCopy, A::SharedMemory, A::Hierarchical, A::Ring},
     2},
    {C::Allreduce,
     kAllreduceHalvingMaxBytes,
     kUnknownBytes,
     1,
     W::Any,
     {A::SharedMemory, A::Hierarchical, A::Ring, kEnd}},
    // broadcast: tree; scatter + allgather for large messages on 3+ ranks; across hosts with
    // several ranks on some, hierarchical first. On 2 ranks, 32-256 KiB: single copy where the
    // kernel allows it; 256 KiB-1 MiB: the tree everywhere.
    {C::Broadcast,
     kBroadcastSingleCopyTwoRanksMinBytes,
     kBroadcastSingleCopyTwoRanksMaxBytes,
     2,
     W::Any,
     {A::SingleCopy, A::SharedMemory, A::Tree, kEnd},
     2},
    {C::Broadcast,
     kBroadcastTreeTwoRanksMinBytes,
     kBroadcastTreeTwoRanksMaxBytes,
     2,
     W::Any,
     {A::Tree, kEnd},
     2},
    {C::Broadcast,
     kBroadcastTreeMaxBytes,
     kUnknownBytes,
     kRingMinWorldSize,
     W::Any,
     {A::SharedMemory, A::Hierarchical, A::ScatterAllgather, A::Tree}},
    {C::Broadcast, 0, kUnknownBytes, 1, W::Any, {A::SharedMemory, A::Hierarchical, A::Tree, kEnd}},
    // reduce: tree; reduce-scatter + gather for large messages on 3+ ranks (hierarchical first
    // across hosts with several ranks on some, as for allreduce).
    {C::Reduce,
     kReduceTreeMaxBytes,
     kUnknownBytes,
     kRingMinWorldSize,
     W::Any,
     {A::SharedMemory, A::Hierarchical, A::ReduceScatterGather, A::Tree}},
    {C::Reduce, 0, kUnknownBytes, 1, W::Any, {A::SharedMemory, A::Hierarchical, A::Tree, kEnd}},
    // allgather: log-round algorithms for small totals, ring for large (hierarchical first
    // across hosts with several ranks on some, as for allreduce). Single copy first where the
    // kernel allows it: on 2 ranks from 32 KiB (next the ring, which also copies once, from
    // 2 MiB), on more from 4 MiB.
    {C::Allgather,
     kAllgatherRingTwoRanksMinBytes,
     kUnknownBytes,
     2,
     W::Any,
     {A::SingleCopy, A::Ring, kEnd},
     2},
    {C::Allgather,
     kAllgatherSingleCopyTwoRanksMinBytes,
     kAllgatherLatencyMaxBytes,
     2,
     W::Any,
     {A::SingleCopy, A::SharedMemory, A::RecursiveDoubling, A::Ring},
     2},
    {C::Allgather,
     kAllgatherLatencyMaxBytes,
     kAllgatherRingTwoRanksMinBytes,
     2,
     W::Any,
     {A::SingleCopy, A::SharedMemory, A::Ring, kEnd},
     2},
    {C::Allgather,
     kAllgatherSingleCopyMinBytes,
     kUnknownBytes,
     kRingMinWorldSize,
     W::Any,
     {A::SingleCopy, A::SharedMemory, A::Hierarchical, A::Ring}},
    {C::Allgather,
     0,
     kAllgatherLatencyMaxBytes,
     1,
     W::PowerOfTwo,
     {A::SharedMemory, A::Hierarchical, A::RecursiveDoubling, A::Ring}},
    {C::Allgather,
     0,
     kAllgatherLatencyMaxBytes,
     1,
     W::NotPowerOfTwo,
     {A::SharedMemory, A::Hierarchical, A::Bruck, A::Ring}},
    {C::Allgather,
     kAllgatherLatencyMaxBytes,
     kUnknownBytes,
     1,
     W::Any,
     {A::SharedMemory, A::Hierarchical, A::Ring, kEnd}},
    // gather / scatter: shared memory on one host, else binomial tree; large scatters on 3
    // ranks, and middle-sized ones on 2, go by the (then flat) tree everywhere. Scatters: single
    // copy first where the kernel allows it, on 2 ranks from 64 KiB, on more from 1 MiB.
    {C::Gather, 0, kUnknownBytes, 1, W::Any, {A::SharedMemory, A::Tree, kEnd}},
    {C::Scatter, kScatterTreeMinBytes, kUnknownBytes, 3, W::Any, {A::SingleCopy, A::Tree, kEnd}, 3},
    {C::Scatter,
     kScatterSingleCopyMinBytes,
     kUnknownBytes,
     kRingMinWorldSize,
     W::Any,
     {A::SingleCopy, A::SharedMemory, A::Tree, kEnd}},
    {C::Scatter,
     kScatterTreeTwoRanksMinBytes,
     kScatterTreeTwoRanksMaxBytes,
     2,
     W::Any,
     {A::SingleCopy, A::Tree, kEnd},
     2},
    {C::Scatter,
     kScatterSingleCopyTwoRanksMinBytes,
     kUnknownBytes,
     2,
     W::Any,
     {A::SingleCopy, A::SharedMemory, A::Tree, kEnd},
     2},
    {C::Scatter, 0, kUnknownBytes, 1, W::Any, {A::SharedMemory, A::Tree, kEnd}},
    // reduce_scatter: recursive halving for small and middle inputs, ring for large.
    {C::ReduceScatter,
     0,
     kReduceScatterHalvingMaxBytes,
     1,
     W::Any,
     {A::SharedMemory, A::Hierarchical, A::RecursiveHalving, A::Ring}},
    {C::ReduceScatter,
     kReduceScatterHalvingMaxBytes,
     kUnknownBytes,
     1,
     W::Any,
     {A::SharedMemory, A::Hierarchical, A::Ring, kEnd}},
    // alltoall: shared memory on one host; else Bruck for tiny uniform blocks, pairwise
    // otherwise (alltoallv: kUnknownBytes). Large uniform ones on 2 ranks: single copy where the
    // kernel allows it, else pairwise, across hosts too (the rule ends below kUnknownBytes, so
    // alltoallv keeps shared memory).
    {C::Alltoall,
     kAlltoallOneCopyTwoRanksMinBytes,
     kUnknownBytes - 1,
     2,
     W::Any,
     {A::SingleCopy, A::Pairwise, kEnd},
     2},
    {C::Alltoall,
     kAlltoallSingleCopyMinBytes,
     kUnknownBytes - 1,
     kRingMinWorldSize,
     W::Any,
     {A::SingleCopy, A::SharedMemory, A::Pairwise, kEnd}},
    {C::Alltoall, 0, kAlltoallBruckMaxBytes, 1, W::Any, {A::SharedMemory, A::Bruck, A::Pairwise}},
    {C::Alltoall,
     kAlltoallBruckMaxBytes,
     kUnknownBytes,
     1,
     W::Any,
     {A::SharedMemory, A::Pairwise, kEnd}},
    // barrier.
    {C::Barrier,
     0,
     kUnknownBytes,
     1,
     W::Any,
     {A::SharedMemory, A::Hierarchical, A::Dissemination, kEnd}},
};

/// The algorithm families, in Collective order: what COHORT_ALGO and the table are keyed by.
constexpr Collective kFamilies[] = {C::Allreduce,     C::Broadcast, C::Reduce,
                                    C::Allgather,     C::Gather,    C::Scatter,
                                    C::ReduceScatter, C::Alltoall,  C::Barrier};

/// Where each family's rules start in kTable (the table's size for a family without rules), so
/// choosing scans only the few rules of the op's family.
constexpr auto kFirstRule = [] {
  std::array<std::size_t, kCollectiveCount> first{};
  first.fill(std::size(kTable));
  for (std::size_t i = std::size(kTable); i-- > 0;)
    first[static_cast<std::size_t>(kTable[i].collective)] = i;
  return first;
}();

/// The scan from kFirstRule stops at the first rule of another family: a family's rules must be
/// adjacent.
constexpr bool families_are_contiguous() {
  for (std::size_t i = 0; i < std::size(kTable); ++i)
    if (kFirstRule[static_cast<std::size_t>(kTable[i].collective)] != i &&
        kTable[i - 1].collective != kTable[i].collective)
      return false;
  return true;
}
static_assert(families_are_contiguous(), "keep each collective's selection rules together");

bool rule_matches(const SelectionRule& rule, Collective collective, std::size_t bytes,
                  int world_size) noexcept {
  if (rule.collective != collective || world_size < rule.min_world_size ||
      world_size > rule.max_world_size)
    return false;
  if (bytes < rule.min_bytes) return false;
  if (rule.max_bytes != kUnknownBytes && bytes >= rule.max_bytes) return false;
  switch (rule.world) {
    case W::Any: return true;
    case W::PowerOfTwo: return patterns::is_power_of_two(world_size);
    case W::NotPowerOfTwo: return !patterns::is_power_of_two(world_size);
  }
  return false;
}

std::string_view trim(std::string_view s) {
  const auto first = s.find_first_not_of(" \t\n");
  if (first == std::string_view::npos) return {};
  const auto last = s.find_last_not_of(" \t\n");
  return s.substr(first, last - first + 1);
}

std::string joined_names(const std::vector<Algorithm>& algorithms) {
  std::string names;
  for (Algorithm a : algorithms) {
    if (!names.empty()) names += ", ";
    names += algorithm_name(a);
  }
  return names;
}

std::string collective_names() {
  std::string names;
  for (Collective c : kFamilies) {
    if (!names.empty()) names += ", ";
    names += collective_name(c);
  }
  return names;
}

Error not_implemented(Collective collective, Algorithm algorithm, std::string_view context) {
  return Error(ErrorCode::InvalidArgument,
               std::string(context) + "algorithm '" + std::string(algorithm_name(algorithm)) +
                   "' is not implemented for " + std::string(collective_name(collective)) +
                   " (choose one of: auto, " + joined_names(algorithms_for(collective)) + ")");
}

}  // namespace

std::span<const SelectionRule> selection_table() noexcept {
  return kTable;
}

bool algorithm_implements(Collective collective, Algorithm algorithm) noexcept {
  return find_algorithm(algorithm_family(collective), algorithm) != nullptr;
}

std::vector<Algorithm> algorithms_for(Collective collective) {
  std::vector<Algorithm> result;
  for (const AlgorithmDescriptor* d : all_algorithms())
    if (d->family == algorithm_family(collective)) result.push_back(d->algorithm);
  return result;
}

AlgorithmOverrides parse_algorithm_overrides(std::string_view spec) {
  AlgorithmOverrides overrides;
  overrides.fill(A::Auto);
  std::array<bool, kCollectiveCount> given{};
  if (trim(spec).empty()) return overrides;
  std::size_t start = 0;
  while (start <= spec.size()) {
    const auto comma = spec.find(',', start);
    const auto end = comma == std::string_view::npos ? spec.size() : comma;
    const std::string_view entry = trim(spec.substr(start, end - start));
    const std::string quoted = "COHORT_ALGO entry '" + std::string(entry) + "': ";
    if (entry.empty())
      throw Error(ErrorCode::InvalidArgument, "COHORT_ALGO '" + std::string(spec) +
                                                  "' has an empty entry (expected "
                                                  "'collective:algorithm' separated by commas)");
    const auto colon = entry.find(':');
    if (colon == std::string_view::npos)
      throw Error(ErrorCode::InvalidArgument,
                  quoted + "expected 'collective:algorithm', e.g. 'allreduce:ring'");
    const std::string_view collective_token = trim(entry.substr(0, colon));
    const std::string_view algorithm_token = trim(entry.substr(colon + 1));
    const auto collective = collective_from_name(collective_token);
    if (!collective)
      throw Error(ErrorCode::InvalidArgument, quoted + "unknown collective '" +
                                                  std::string(collective_token) +
                                                  "' (one of: " + collective_names() + ")");
    if (algorithm_family(*collective) != *collective || *collective == C::Send ||
        *collective == C::Recv)
      throw Error(ErrorCode::InvalidArgument,
                  quoted + std::string(collective_name(*collective)) +
                      " has no algorithms of its own (one of: " + collective_names() +
                      "; a v-form follows its family, e.g. allgather for allgatherv)");
    const auto algorithm = algorithm_from_name(algorithm_token);
    if (!algorithm)
      throw Error(ErrorCode::InvalidArgument,
                  quoted + "unknown algorithm '" + std::string(algorithm_token) + "' for " +
                      std::string(collective_name(*collective)) + " (one of: auto, " +
                      joined_names(algorithms_for(*collective)) + ")");
    if (*algorithm != A::Auto && !algorithm_implements(*collective, *algorithm))
      throw not_implemented(*collective, *algorithm, quoted);
    const auto index = static_cast<std::size_t>(*collective);
    if (given[index])
      throw Error(ErrorCode::InvalidArgument,
                  quoted + std::string(collective_name(*collective)) + " is given twice");
    given[index] = true;
    overrides[index] = *algorithm;
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return overrides;
}

const AlgorithmOverrides& environment_algorithm_overrides() {
  // Parsed again only when the tunables snapshot changed (init() reloads it), so every op pays a
  // pointer comparison, and a malformed COHORT_ALGO keeps throwing (init() calls this first, so
  // a typo is an error at init, before any op).
  thread_local const Tunables* parsed_from = nullptr;
  thread_local AlgorithmOverrides overrides{};
  const Tunables& current = tunables();
  if (&current != parsed_from) {
    overrides = parse_algorithm_overrides(current.algorithm_spec);
    parsed_from = &current;
  }
  return overrides;
}

void check_forced_algorithm(Collective collective, Algorithm forced) {
  if (forced != A::Auto && !algorithm_implements(collective, forced))
    throw not_implemented(algorithm_family(collective), forced, "forced ");
}

Candidates select_candidates(Collective collective, std::size_t bytes, int world_size,
                             Algorithm forced, const AlgorithmOverrides& overrides) {
  collective = algorithm_family(collective);
  Candidates candidates;
  auto add = [&](Algorithm a) {
    if (a != A::Auto && std::find(candidates.begin(), candidates.end(), a) == candidates.end())
      candidates.push_back(a);
  };
  check_forced_algorithm(collective, forced);
  add(forced);
  add(overrides[static_cast<std::size_t>(collective)]);
  for (std::size_t i = kFirstRule[static_cast<std::size_t>(collective)];
       i < std::size(kTable) && kTable[i].collective == collective; ++i) {
    const SelectionRule& rule = kTable[i];
    if (!rule_matches(rule, collective, bytes, world_size)) continue;
    for (Algorithm a : rule.candidates) add(a);
    break;
  }
  return candidates;
}

void SelectionMemo::refresh() {
  const Tunables& current = tunables();
  if (&current != parsed_from_) {
    overrides_ = parse_algorithm_overrides(current.algorithm_spec);  // throws while malformed
    parsed_from_ = &current;
    entries_.fill(Entry{});
    // The measurements stay: every rank must keep counting calls alike, and a reload happens
    // on one rank at a time.
  }
}

const Candidates& SelectionMemo::candidates(Collective collective, std::size_t bytes,
                                            int world_size, Algorithm forced) {
  refresh();
  collective = algorithm_family(collective);
  Entry& e = entries_[static_cast<std::size_t>(collective)];
  if (!e.valid || e.bytes != bytes || e.world_size != world_size || e.forced != forced) {
    // Chosen first: a forced algorithm the family lacks throws and leaves the entry as it was.
    const Candidates chosen = select_candidates(collective, bytes, world_size, forced, overrides_);
    e = Entry{true, bytes, world_size, forced, chosen};
  }
  return e.candidates;
}

SelectionMemo::Classes SelectionMemo::measured_classes(MeasuredChoice::SmallClass small) noexcept {
  Classes classes;
  for (std::size_t k = 0; k < classes.size(); ++k)
    classes[k] = MeasuredChoice(kMeasuredChoiceMinBytes << k, small);
  return classes;
}

MeasuredChoice* SelectionMemo::measured(Collective collective, std::size_t bytes, int world_size,
                                        Algorithm forced, CallForm form) {
  refresh();
  collective = algorithm_family(collective);
  // The data movers from their own minimum size (and world size); the rooted ones by the root's
  // form.
  const auto mover = [&](Classes& classes, std::size_t min_bytes, int min_world = 2) -> Classes* {
    return bytes >= min_bytes && world_size >= min_world ? &classes : nullptr;
  };
  const auto by_form = [form](std::array<Classes, 2>& classes) -> Classes& {
    return classes[form == CallForm::InPlace ? 1 : 0];
  };
  Classes* classes = nullptr;
  switch (collective) {
    case Collective::Allreduce: classes = &measured_allreduce_; break;
    case Collective::Reduce: classes = &measured_reduce_; break;
    case Collective::ReduceScatter: classes = &measured_reduce_scatter_; break;
    case Collective::Broadcast:
      classes = mover(by_form(measured_broadcast_), kBroadcastMeasuredMinBytes);
      break;
    case Collective::Scatter:
      classes =
          mover(by_form(measured_scatter_), kScatterMeasuredMinBytes, kScatterMeasuredMinWorldSize);
      break;
    case Collective::Gather:
      classes = mover(by_form(measured_gather_), kGatherMeasuredMinBytes);
      break;
    case Collective::Alltoall:
      // An alltoallv's sizes differ per rank (kUnknownBytes): never a class.
      if (bytes != kUnknownBytes)
        classes =
            mover(measured_alltoall_, kAlltoallMeasuredMinBytes, kAlltoallMeasuredMinWorldSize);
      break;
    default: break;
  }
  if (classes == nullptr) return nullptr;
  if (bytes < kMeasuredChoiceMinBytes || forced != Algorithm::Auto ||
      overrides_[static_cast<std::size_t>(collective)] != Algorithm::Auto)
    return nullptr;
  const auto doublings =
      static_cast<std::size_t>(std::bit_width(bytes) - std::bit_width(kMeasuredChoiceMinBytes));
  return &(*classes)[std::min(doublings, kMeasuredChoiceBuckets - 1)];
}

}  // namespace cohort::algorithms
