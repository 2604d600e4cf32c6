// The selection table, COHORT_ALGO parsing and the candidate order, without any network.

#include "algorithms/selection.hpp"

#include <cohort/algorithm.hpp>
#include <cohort/error.hpp>

#include <catch2/catch.hpp>

#include <string>
#include <vector>

using namespace cohort;
using namespace cohort::algorithms;

namespace {

constexpr Collective kCollectives[] = {
    Collective::Allreduce,     Collective::Broadcast, Collective::Reduce,
    Collective::Allgather,     Collective::Gather,    Collective::Scatter,
    Collective::ReduceScatter, Collective::Alltoall,  Collective::Barrier};

// The algorithm of each collective that accepts every argument (decline-free fallback).
Algorithm universal_fallback(Collective c) {
  switch (c) {
    case Collective::Allreduce:
    case Collective::Allgather:
    case Collective::ReduceScatter: return Algorithm::Ring;
    case Collective::Broadcast:
    case Collective::Reduce:
    case Collective::Gather:
    case Collective::Scatter: return Algorithm::Tree;
    case Collective::Alltoall: return Algorithm::Pairwise;
    case Collective::Barrier: return Algorithm::Dissemination;
    default: return Algorithm::Auto;  // v-forms, send and recv: not families
  }
}

AlgorithmOverrides none() {
  AlgorithmOverrides o;
  o.fill(Algorithm::Auto);
  return o;
}

std::vector<Algorithm> pick(Collective c, std::size_t bytes, int world,
                            Algorithm forced = Algorithm::Auto,
                            const AlgorithmOverrides& o = none()) {
  const Candidates candidates = select_candidates(c, bytes, world, forced, o);
  return std::vector<Algorithm>(candidates.begin(), candidates.end());
}

void require_invalid(std::string_view spec, const std::string& fragment) {
  try {
    parse_algorithm_overrides(spec);
    FAIL("accepted '" << spec << "'");
  } catch (const Error& e) {
    CAPTURE(spec, e.what());
    REQUIRE(e.code() == ErrorCode::InvalidArgument);
    REQUIRE(std::string(e.what()).find(fragment) != std::string::npos);
  }
}

}  // namespace

TEST_CASE("algorithm and collective names round-trip", "[selection]") {
  for (int i = 0; i < kAlgorithmCount; ++i) {
    const auto a = static_cast<Algorithm>(i);
    REQUIRE(algorithm_name(a) != "unknown");
    REQUIRE(algorithm_from_name(algorithm_name(a)) == a);
  }
  for (Collective c : kCollectives) REQUIRE(collective_from_name(collective_name(c)) == c);
  REQUIRE(collective_from_name("reducescatter") == Collective::ReduceScatter);
  REQUIRE(collective_name(Collective::ReduceScatter) == "reduce_scatter");
  REQUIRE(algorithm_name(Algorithm::ScatterAllgather) == "scatter_allgather");
  REQUIRE_FALSE(algorithm_from_name("Ring"));
  REQUIRE_FALSE(collective_from_name("all_reduce"));
}

TEST_CASE("every (collective, bytes, world size) has candidates ending in a universal one",
          "[selection]") {
  const std::size_t sizes[] = {0,          1,    4 * kKiB, 64 * kKiB - 1, 64 * kKiB,
                               256 * kKiB, kMiB, 4 * kMiB, 1ull << 34,    kUnknownBytes};
  for (Collective c : kCollectives) {
    for (std::size_t bytes : sizes) {
      for (int world = 1; world <= 64; ++world) {
        const auto candidates = pick(c, bytes, world);
        CAPTURE(collective_name(c), bytes, world);
        REQUIRE_FALSE(candidates.empty());
        REQUIRE(candidates.back() == universal_fallback(c));
        for (Algorithm a : candidates) REQUIRE(algorithm_implements(c, a));
      }
    }
  }
}

TEST_CASE("the table picks latency algorithms for small and the ring for large", "[selection]") {
  // Shared memory leads every allreduce rule; it declines when ranks span hosts, and then the
  // hierarchical algorithm is next (it declines unless some host has several ranks).
  REQUIRE(pick(Collective::Allreduce, 1024, 8) ==
          std::vector<Algorithm>{Algorithm::SharedMemory, Algorithm::Hierarchical,
                                 Algorithm::RecursiveDoubling, Algorithm::Ring});
  REQUIRE(pick(Collective::Allreduce, kAllreduceLatencyMaxBytes, 5) ==
          std::vector<Algorithm>{Algorithm::SharedMemory, Algorithm::Hierarchical,
                                 Algorithm::Rabenseifner, Algorithm::Ring});
  REQUIRE(
      pick(Collective::Allreduce, kAllreduceHalvingMaxBytes, 5) ==
      std::vector<Algorithm>{Algorithm::SharedMemory, Algorithm::Hierarchical, Algorithm::Ring});
  // On 2 ranks single copy comes first from 4 MiB up to (not including) 16 MiB; without it (it
  // declines) the list goes on as the rule for every world size does.
  using Alg = Algorithm;
  const std::vector<Alg> arena_first{Alg::SharedMemory, Alg::Hierarchical, Alg::Ring};
  const std::vector<Alg> single_copy_first{Alg::SingleCopy, Alg::SharedMemory, Alg::Hierarchical,
                                           Alg::Ring};
  REQUIRE(kAllreduceSingleCopyTwoRanksMinBytes == kAllreduceHalvingMaxBytes);
  REQUIRE(pick(Collective::Allreduce, kAllreduceSingleCopyTwoRanksMinBytes - 1, 2) ==
          std::vector<Alg>{Alg::SharedMemory, Alg::Hierarchical, Alg::Rabenseifner, Alg::Ring});
  for (std::size_t bytes :
       {kAllreduceSingleCopyTwoRanksMinBytes, kAllreduceSingleCopyTwoRanksMaxBytes - 1})
    REQUIRE(pick(Collective::Allreduce, bytes, 2) == single_copy_first);
  REQUIRE(pick(Collective::Allreduce, kAllreduceSingleCopyTwoRanksMaxBytes, 2) == arena_first);
  REQUIRE(pick(Collective::Allreduce, kAllreduceSingleCopyTwoRanksMinBytes, 3) == arena_first);
  // Behind shared memory and hierarchical (which decline on flat layouts), the message-based
  // choices:
  REQUIRE(pick(Collective::Allgather, 100, 8) ==
          std::vector<Algorithm>{Algorithm::SharedMemory, Algorithm::Hierarchical,
                                 Algorithm::RecursiveDoubling, Algorithm::Ring});
  REQUIRE(pick(Collective::Allgather, 100, 6) ==
          std::vector<Algorithm>{Algorithm::SharedMemory, Algorithm::Hierarchical, Algorithm::Bruck,
                                 Algorithm::Ring});
  REQUIRE(
      pick(Collective::Allgather, kAllgatherLatencyMaxBytes, 6) ==
      std::vector<Algorithm>{Algorithm::SharedMemory, Algorithm::Hierarchical, Algorithm::Ring});
  REQUIRE(pick(Collective::Broadcast, 100, 7) == std::vector<Algorithm>{Algorithm::SharedMemory,
                                                                        Algorithm::Hierarchical,
                                                                        Algorithm::Tree});
  REQUIRE(pick(Collective::Broadcast, kBroadcastTreeMaxBytes, 7) ==
          std::vector<Algorithm>{Algorithm::SharedMemory, Algorithm::Hierarchical,
                                 Algorithm::ScatterAllgather, Algorithm::Tree});
  // Two ranks: scatter + allgather moves the same bytes as the tree in more steps.
  REQUIRE(
      pick(Collective::Broadcast, 4 * kMiB, 2) ==
      std::vector<Algorithm>{Algorithm::SharedMemory, Algorithm::Hierarchical, Algorithm::Tree});
  REQUIRE(pick(Collective::Reduce, 10 * kMiB, 4) ==
          std::vector<Algorithm>{Algorithm::SharedMemory, Algorithm::Hierarchical,
                                 Algorithm::ReduceScatterGather, Algorithm::Tree});
  REQUIRE(pick(Collective::Reduce, 100, 4) == std::vector<Algorithm>{Algorithm::SharedMemory,
                                                                     Algorithm::Hierarchical,
                                                                     Algorithm::Tree});
  REQUIRE(pick(Collective::ReduceScatter, 100, 3) ==
          std::vector<Algorithm>{Algorithm::SharedMemory, Algorithm::Hierarchical,
                                 Algorithm::RecursiveHalving, Algorithm::Ring});
  REQUIRE(pick(Collective::Alltoall, 100, 3) ==
          std::vector<Algorithm>{Algorithm::SharedMemory, Algorithm::Bruck, Algorithm::Pairwise});
  // alltoallv has no meaningful common size: shared memory, else pairwise (Bruck needs uniform
  // blocks).
  REQUIRE(pick(Collective::Alltoall, kUnknownBytes, 3) ==
          std::vector<Algorithm>{Algorithm::SharedMemory, Algorithm::Pairwise});
  REQUIRE(pick(Collective::Barrier, 0, 9) == std::vector<Algorithm>{Algorithm::SharedMemory,
                                                                    Algorithm::Hierarchical,
                                                                    Algorithm::Dissemination});
  REQUIRE(pick(Collective::Gather, 10 * kMiB, 5) ==
          std::vector<Algorithm>{Algorithm::SharedMemory, Algorithm::Tree});
  REQUIRE(pick(Collective::Scatter, 100, 2) ==
          std::vector<Algorithm>{Algorithm::SharedMemory, Algorithm::Tree});
  using A = Algorithm;
  using V = std::vector<Algorithm>;
  // Scatter: single copy first on 2 ranks from 64 KiB, the tree next from 512 KiB up to (not
  // including) 2 MiB; on 3 ranks and more single copy from 1 MiB, and on 3 ranks the (flat)
  // tree next from 8 MiB; the arena elsewhere.
  REQUIRE(pick(Collective::Scatter, kScatterSingleCopyTwoRanksMinBytes - 1, 2) ==
          V{A::SharedMemory, A::Tree});
  REQUIRE(pick(Collective::Scatter, kScatterSingleCopyTwoRanksMinBytes, 2) ==
          V{A::SingleCopy, A::SharedMemory, A::Tree});
  REQUIRE(pick(Collective::Scatter, kScatterTreeTwoRanksMinBytes - 1, 2) ==
          V{A::SingleCopy, A::SharedMemory, A::Tree});
  REQUIRE(pick(Collective::Scatter, kScatterTreeTwoRanksMinBytes, 2) == V{A::SingleCopy, A::Tree});
  REQUIRE(pick(Collective::Scatter, kScatterTreeTwoRanksMaxBytes - 1, 2) ==
          V{A::SingleCopy, A::Tree});
  REQUIRE(pick(Collective::Scatter, kScatterTreeTwoRanksMaxBytes, 2) ==
          V{A::SingleCopy, A::SharedMemory, A::Tree});
  for (int world : {3, 4, 7}) {
    REQUIRE(pick(Collective::Scatter, kScatterSingleCopyMinBytes - 1, world) ==
            V{A::SharedMemory, A::Tree});
    REQUIRE(pick(Collective::Scatter, kScatterSingleCopyMinBytes, world) ==
            V{A::SingleCopy, A::SharedMemory, A::Tree});
  }
  REQUIRE(pick(Collective::Scatter, kScatterTreeMinBytes, 3) == V{A::SingleCopy, A::Tree});
  REQUIRE(pick(Collective::Scatter, kScatterTreeMinBytes, 4) ==
          V{A::SingleCopy, A::SharedMemory, A::Tree});
  // From 1 MiB (uniform) on 2 ranks alltoall is single copy, then pairwise; from 4 MiB on 3
  // ranks and more single copy comes first too; alltoallv keeps the arena everywhere.
  REQUIRE(pick(Collective::Alltoall, kAlltoallOneCopyTwoRanksMinBytes, 2) ==
          V{A::SingleCopy, A::Pairwise});
  REQUIRE(pick(Collective::Alltoall, kAlltoallOneCopyTwoRanksMinBytes - 1, 2) ==
          V{A::SharedMemory, A::Pairwise});
  REQUIRE(pick(Collective::Alltoall, kAlltoallSingleCopyMinBytes - 1, 3) ==
          V{A::SharedMemory, A::Pairwise});
  for (int world : {3, 4, 5})
    REQUIRE(pick(Collective::Alltoall, kAlltoallSingleCopyMinBytes, world) ==
            V{A::SingleCopy, A::SharedMemory, A::Pairwise});
  REQUIRE(pick(Collective::Alltoall, kAlltoallSingleCopyMinBytes, 2) ==
          V{A::SingleCopy, A::Pairwise});
  for (int world : {2, 3})
    REQUIRE(pick(Collective::Alltoall, kUnknownBytes, world) == V{A::SharedMemory, A::Pairwise});
  // Broadcast on 2 ranks: single copy from 32 KiB up to (not including) 256 KiB, the tree from
  // there up to 1 MiB, the arena elsewhere; no single copy on 3 ranks.
  REQUIRE(pick(Collective::Broadcast, kBroadcastSingleCopyTwoRanksMinBytes - 1, 2) ==
          V{A::SharedMemory, A::Hierarchical, A::Tree});
  for (std::size_t bytes :
       {kBroadcastSingleCopyTwoRanksMinBytes, kBroadcastSingleCopyTwoRanksMaxBytes - 1})
    REQUIRE(pick(Collective::Broadcast, bytes, 2) == V{A::SingleCopy, A::SharedMemory, A::Tree});
  REQUIRE(pick(Collective::Broadcast, kBroadcastSingleCopyTwoRanksMinBytes, 3) ==
          V{A::SharedMemory, A::Hierarchical, A::Tree});
  static_assert(kBroadcastSingleCopyTwoRanksMaxBytes == kBroadcastTreeTwoRanksMinBytes,
                "single copy hands 2-rank broadcasts straight to the tree");
  REQUIRE(pick(Collective::Broadcast, kBroadcastTreeTwoRanksMinBytes, 2) == V{A::Tree});
  REQUIRE(pick(Collective::Broadcast, kBroadcastTreeTwoRanksMaxBytes - 1, 2) == V{A::Tree});
  REQUIRE(pick(Collective::Broadcast, kBroadcastTreeTwoRanksMaxBytes, 2) ==
          V{A::SharedMemory, A::Hierarchical, A::Tree});
  // Allgather (and allgatherv, whose total every rank knows): on 2 ranks single copy from 32 KiB,
  // then the arena up to 2 MiB and the ring from there; on 3 ranks and more single copy from
  // 4 MiB.
  REQUIRE(pick(Collective::Allgather, kAllgatherSingleCopyTwoRanksMinBytes - 1, 2) ==
          V{A::SharedMemory, A::Hierarchical, A::RecursiveDoubling, A::Ring});
  REQUIRE(pick(Collective::Allgather, kAllgatherSingleCopyTwoRanksMinBytes, 2) ==
          V{A::SingleCopy, A::SharedMemory, A::RecursiveDoubling, A::Ring});
  REQUIRE(pick(Collective::Allgather, kAllgatherLatencyMaxBytes, 2) ==
          V{A::SingleCopy, A::SharedMemory, A::Ring});
  REQUIRE(pick(Collective::Allgather, kAllgatherRingTwoRanksMinBytes - 1, 2) ==
          V{A::SingleCopy, A::SharedMemory, A::Ring});
  REQUIRE(pick(Collective::Allgather, kAllgatherRingTwoRanksMinBytes, 2) ==
          V{A::SingleCopy, A::Ring});
  for (int world : {3, 4, 6}) {
    REQUIRE(pick(Collective::Allgather, kAllgatherSingleCopyMinBytes - 1, world) ==
            V{A::SharedMemory, A::Hierarchical, A::Ring});
    REQUIRE(pick(Collective::Allgather, kAllgatherSingleCopyMinBytes, world) ==
            V{A::SingleCopy, A::SharedMemory, A::Hierarchical, A::Ring});
  }
  // Gathers never take single copy (it lost on 4 KiB pages from 4 MiB).
  for (int world : {2, 3, 4})
    REQUIRE(pick(Collective::Gather, 64 * kMiB, world) == V{A::SharedMemory, A::Tree});
}

TEST_CASE("every rule is well formed", "[selection]") {
  // Rules are matched first to last, so narrower rules may shadow parts of later ones; each must
  // still have a non-empty byte range and a candidate list with no gaps.
  for (const auto& rule : selection_table()) {
    CAPTURE(collective_name(rule.collective), rule.min_bytes);
    REQUIRE(rule.min_bytes < rule.max_bytes);
    REQUIRE(rule.min_world_size >= 1);
    REQUIRE(rule.max_world_size >= rule.min_world_size);
    REQUIRE(rule.candidates[0] != Algorithm::Auto);
    bool ended = false;
    for (Algorithm a : rule.candidates) {
      if (a == Algorithm::Auto)
        ended = true;
      else
        REQUIRE_FALSE(ended);
    }
  }
}

TEST_CASE("forced algorithm first, then the override, then the table", "[selection]") {
  auto o = none();
  o[static_cast<std::size_t>(Collective::Allreduce)] = Algorithm::Rabenseifner;
  REQUIRE(pick(Collective::Allreduce, 10, 4, Algorithm::Auto, o) ==
          std::vector<Algorithm>{Algorithm::Rabenseifner, Algorithm::SharedMemory,
                                 Algorithm::Hierarchical, Algorithm::RecursiveDoubling,
                                 Algorithm::Ring});
  REQUIRE(pick(Collective::Allreduce, 10, 4, Algorithm::Ring, o) ==
          std::vector<Algorithm>{Algorithm::Ring, Algorithm::Rabenseifner, Algorithm::SharedMemory,
                                 Algorithm::Hierarchical, Algorithm::RecursiveDoubling});
  // Duplicates are dropped: forcing the table's own first choice changes nothing.
  REQUIRE(pick(Collective::Allreduce, 10, 4, Algorithm::SharedMemory) ==
          std::vector<Algorithm>{Algorithm::SharedMemory, Algorithm::Hierarchical,
                                 Algorithm::RecursiveDoubling, Algorithm::Ring});
  // An override for another collective does not leak.
  REQUIRE(
      pick(Collective::Broadcast, 10, 4, Algorithm::Auto, o) ==
      std::vector<Algorithm>{Algorithm::SharedMemory, Algorithm::Hierarchical, Algorithm::Tree});
}

TEST_CASE("a declining candidate falls through to the next", "[selection]") {
  // Recursive doubling allgather declines on 6 ranks; forcing it still leaves Bruck and the ring
  // behind it, so the dispatcher has somewhere to fall through to.
  const auto candidates = pick(Collective::Allgather, 100, 6, Algorithm::RecursiveDoubling);
  REQUIRE(candidates == std::vector<Algorithm>{Algorithm::RecursiveDoubling,
                                               Algorithm::SharedMemory, Algorithm::Hierarchical,
                                               Algorithm::Bruck, Algorithm::Ring});
  // Bruck alltoall declines alltoallv; shared memory and pairwise follow it.
  REQUIRE(pick(Collective::Alltoall, kUnknownBytes, 4, Algorithm::Bruck) ==
          std::vector<Algorithm>{Algorithm::Bruck, Algorithm::SharedMemory, Algorithm::Pairwise});
}

TEST_CASE("forcing an algorithm a collective does not have is an error naming both",
          "[selection]") {
  try {
    pick(Collective::Broadcast, 10, 4, Algorithm::Pairwise);
    FAIL("accepted pairwise broadcast");
  } catch (const Error& e) {
    REQUIRE(e.code() == ErrorCode::InvalidArgument);
    const std::string what = e.what();
    REQUIRE(what.find("pairwise") != std::string::npos);
    REQUIRE(what.find("broadcast") != std::string::npos);
  }
  REQUIRE(algorithms_for(Collective::Allreduce).size() == 6);
  REQUIRE_FALSE(algorithm_implements(Collective::Barrier, Algorithm::Ring));
  REQUIRE_FALSE(algorithm_implements(Collective::Allreduce, Algorithm::Auto));
}

TEST_CASE("COHORT_ALGO parses collectives and algorithms", "[selection]") {
  auto o = parse_algorithm_overrides("allreduce:ring,broadcast:tree");
  REQUIRE(o[static_cast<std::size_t>(Collective::Allreduce)] == Algorithm::Ring);
  REQUIRE(o[static_cast<std::size_t>(Collective::Broadcast)] == Algorithm::Tree);
  REQUIRE(o[static_cast<std::size_t>(Collective::Reduce)] == Algorithm::Auto);

  o = parse_algorithm_overrides(" reduce_scatter : recursive_halving , alltoall:bruck ");
  REQUIRE(o[static_cast<std::size_t>(Collective::ReduceScatter)] == Algorithm::RecursiveHalving);
  REQUIRE(o[static_cast<std::size_t>(Collective::Alltoall)] == Algorithm::Bruck);

  o = parse_algorithm_overrides("reducescatter:ring,allgather:auto");
  REQUIRE(o[static_cast<std::size_t>(Collective::ReduceScatter)] == Algorithm::Ring);
  REQUIRE(o[static_cast<std::size_t>(Collective::Allgather)] == Algorithm::Auto);

  for (auto spec : {"", "   "}) {
    o = parse_algorithm_overrides(spec);
    for (Algorithm a : o) REQUIRE(a == Algorithm::Auto);
  }
}

TEST_CASE("COHORT_ALGO errors name the bad token", "[selection]") {
  require_invalid("allreduce:rign", "'rign'");
  require_invalid("allreduc:ring", "'allreduc'");
  require_invalid("allreduce", "'allreduce'");
  require_invalid("allreduce:ring,,broadcast:tree", "empty entry");
  require_invalid("allreduce:ring,", "empty entry");
  require_invalid("broadcast:ring", "'ring' is not implemented for broadcast");
  require_invalid("allreduce:ring,allreduce:rabenseifner", "given twice");
  require_invalid("allreduce:Ring", "'Ring'");
  // The message lists what would have been valid.
  require_invalid("barrier:tree", "dissemination");
}
