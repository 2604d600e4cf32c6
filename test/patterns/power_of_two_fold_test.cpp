// Folding a world onto a power of two: roles pair up, new ranks are a bijection onto
// [0, pof2), doubling partners are symmetric, halving ranges tile the ranks.

#include "patterns/power_of_two_fold.hpp"
#include "patterns/binomial_tree.hpp"

#include <catch2/catch.hpp>

#include <vector>

using namespace cohort::patterns;

TEST_CASE("fold roles pair extras with partners and number the active ranks", "[patterns]") {
  for (int size = 1; size <= 64; ++size) {
    const int pof2 = floor_power_of_two(size);
    std::vector<int> new_rank_owner(pof2, -1);
    int extras = 0;
    for (int rank = 0; rank < size; ++rank) {
      const auto pos = fold_position(rank, size);
      REQUIRE(pos.pof2 == pof2);
      REQUIRE(pos.extra == size - pof2);
      switch (pos.role) {
        case FoldRole::Extra: {
          ++extras;
          REQUIRE(pos.new_rank == -1);
          const auto partner = fold_position(pos.partner, size);
          REQUIRE(partner.role == FoldRole::Partner);
          REQUIRE(partner.partner == rank);
          break;
        }
        case FoldRole::Partner:
          REQUIRE(fold_position(pos.partner, size).role == FoldRole::Extra);
          [[fallthrough]];
        case FoldRole::Plain:
          REQUIRE(pos.new_rank >= 0);
          REQUIRE(pos.new_rank < pof2);
          REQUIRE(new_rank_owner[pos.new_rank] == -1);
          new_rank_owner[pos.new_rank] = rank;
          REQUIRE(fold_active_rank(pos.new_rank, size) == rank);
          break;
      }
    }
    REQUIRE(extras == size - pof2);
    for (int owner : new_rank_owner) REQUIRE(owner >= 0);
    // New ranks cover old ranks in order, tiling [0, size).
    REQUIRE(fold_first_old_rank(0, size) == 0);
    REQUIRE(fold_first_old_rank(pof2, size) == size);
    for (int v = 0; v < pof2; ++v) {
      const int first = fold_first_old_rank(v, size);
      const int end = fold_first_old_rank(v + 1, size);
      REQUIRE(end > first);
      REQUIRE(end - first <= 2);
      // The active rank of v is among the old ranks it covers.
      REQUIRE(fold_active_rank(v, size) >= first);
      REQUIRE(fold_active_rank(v, size) < end);
    }
  }
  // Size 6: pof2 4, two extras (0, 2) folded into 1, 3; 4, 5 become 2, 3.
  REQUIRE(fold_position(0, 6).role == FoldRole::Extra);
  REQUIRE(fold_position(3, 6).new_rank == 1);
  REQUIRE(fold_position(5, 6).new_rank == 3);
}

TEST_CASE("recursive doubling partners are symmetric and cover all ranks", "[patterns]") {
  for (int pof2 = 1; pof2 <= 64; pof2 *= 2) {
    for (int v = 0; v < pof2; ++v) {
      // After every round, v has (transitively) heard from all ranks sharing its high bits.
      std::vector<bool> heard(pof2, false);
      heard[v] = true;
      for (int round = 0; (1 << round) < pof2; ++round) {
        const int p = doubling_partner(v, round);
        REQUIRE(p >= 0);
        REQUIRE(p < pof2);
        REQUIRE(p != v);
        REQUIRE(doubling_partner(p, round) == v);
      }
      int reached = 1;
      for (int round = 0; (1 << round) < pof2; ++round) reached *= 2;
      REQUIRE(reached == pof2);
    }
  }
}

TEST_CASE("recursive halving keeps the half holding the rank and ends on it", "[patterns]") {
  for (int pof2 = 1; pof2 <= 64; pof2 *= 2) {
    for (int v = 0; v < pof2; ++v) {
      int lo = 0, hi = pof2;
      for (int mask = pof2 / 2; mask >= 1; mask /= 2) {
        const auto split = halving_split(v, mask);
        const auto partner_split = halving_split(v ^ mask, mask);
        // Kept and sent halves tile the current range.
        REQUIRE(std::min(split.keep_begin, split.send_begin) == lo);
        REQUIRE(std::max(split.keep_end, split.send_end) == hi);
        REQUIRE(split.keep_end - split.keep_begin == mask);
        REQUIRE(split.send_end - split.send_begin == mask);
        REQUIRE(split.keep_begin <= v);
        REQUIRE(v < split.keep_end);
        // What the partner sends is exactly what this rank keeps.
        REQUIRE(partner_split.send_begin == split.keep_begin);
        REQUIRE(partner_split.send_end == split.keep_end);
        lo = split.keep_begin;
        hi = split.keep_end;
      }
      REQUIRE(lo == v);
      REQUIRE(hi == v + 1);
    }
  }
}
