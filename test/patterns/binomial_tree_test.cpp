// Binomial trees: for every size and root, every rank appears exactly once, parents and children
// agree, subtrees are the contiguous ranges gather/scatter rely on, and the depth is log2.

#include "patterns/binomial_tree.hpp"
#include "patterns/ring.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <bit>
#include <vector>

using namespace cohort::patterns;

TEST_CASE("power-of-two helpers", "[patterns]") {
  REQUIRE(ceil_power_of_two(1) == 1);
  REQUIRE(ceil_power_of_two(5) == 8);
  REQUIRE(ceil_power_of_two(8) == 8);
  REQUIRE(floor_power_of_two(1) == 1);
  REQUIRE(floor_power_of_two(7) == 4);
  REQUIRE(floor_power_of_two(8) == 8);
  REQUIRE(is_power_of_two(1));
  REQUIRE(is_power_of_two(64));
  REQUIRE_FALSE(is_power_of_two(0));
  REQUIRE_FALSE(is_power_of_two(6));
  REQUIRE(ceil_log2(1) == 0);
  REQUIRE(ceil_log2(2) == 1);
  REQUIRE(ceil_log2(5) == 3);
  REQUIRE(ceil_log2(64) == 6);
}

TEST_CASE("a binomial tree reaches every rank exactly once", "[patterns]") {
  for (int size = 1; size <= 64; ++size) {
    for (int root : {0, 1, size / 2, size - 1}) {
      if (root >= size) continue;
      // Walk down from the root through children lists (absolute ranks).
      std::vector<int> visits(size, 0);
      std::vector<int> depth(size, 0);
      std::vector<int> stack{root};
      while (!stack.empty()) {
        const int rank = stack.back();
        stack.pop_back();
        ++visits[rank];
        const int v = relative_rank(rank, root, size);
        for (int child_v : binomial_children(v, size)) {
          const int child = absolute_rank(child_v, root, size);
          // The child names us as its parent.
          REQUIRE(absolute_rank(binomial_parent(child_v), root, size) == rank);
          depth[child] = depth[rank] + 1;
          stack.push_back(child);
        }
      }
      for (int count : visits) REQUIRE(count == 1);
      // A rank's depth is the number of set bits of its relative rank: at most ceil(log2 size).
      for (int rank = 0; rank < size; ++rank)
        REQUIRE(depth[rank] ==
                std::popcount(static_cast<unsigned>(relative_rank(rank, root, size))));
      REQUIRE(*std::max_element(depth.begin(), depth.end()) <= ceil_log2(size));
    }
  }
}

TEST_CASE("binomial subtrees are contiguous relative ranges", "[patterns]") {
  for (int size = 1; size <= 64; ++size) {
    REQUIRE(binomial_subtree_extent(0, size) == size);
    for (int v = 0; v < size; ++v) {
      // The subtree extent is one (v itself) plus its children's extents, and the children's
      // ranges tile (v, v + extent) in order.
      int next = v + 1;
      for (int child : binomial_children(v, size)) {
        REQUIRE(child == next);
        next += binomial_subtree_extent(child, size);
      }
      REQUIRE(next == v + binomial_subtree_extent(v, size));
      REQUIRE(next <= size);
      const auto children = binomial_children(v, size);
      REQUIRE(std::is_sorted(children.begin(), children.end()));
    }
  }
  // Size 6 from root 0: 0 -> {1, 2, 4}; 2 -> {3}; 4 -> {5}.
  REQUIRE(binomial_children(0, 6) == std::vector<int>{1, 2, 4});
  REQUIRE(binomial_children(2, 6) == std::vector<int>{3});
  REQUIRE(binomial_children(4, 6) == std::vector<int>{5});
  REQUIRE(binomial_children(5, 6).empty());
  REQUIRE(binomial_parent(6) == 4);
  REQUIRE(binomial_parent(0) == -1);
}
