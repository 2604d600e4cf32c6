// Ring neighbours and the relative/absolute rank conversions used by rooted ring algorithms.

#include "patterns/ring.hpp"

#include <catch2/catch.hpp>

#include <vector>

using namespace cohort::patterns;

TEST_CASE("ring neighbours form one cycle through every rank", "[patterns]") {
  for (int size = 1; size <= 64; ++size) {
    std::vector<int> seen(size, 0);
    int position = 0;
    for (int step = 0; step < size; ++step) {
      ++seen[position];
      const auto n = ring_neighbours(position, size);
      REQUIRE(ring_neighbours(n.right, size).left == position);
      position = n.right;
    }
    REQUIRE(position == 0);
    for (int count : seen) REQUIRE(count == 1);
  }
  REQUIRE(ring_neighbours(0, 1).left == 0);
  REQUIRE(ring_neighbours(0, 1).right == 0);
  REQUIRE(ring_neighbours(1, 2).left == 0);
  REQUIRE(ring_neighbours(1, 2).right == 0);
  REQUIRE(ring_neighbours(0, 5).left == 4);
}

TEST_CASE("relative and absolute ranks are inverse rotations", "[patterns]") {
  REQUIRE(wrap(-1, 5) == 4);
  REQUIRE(wrap(-11, 5) == 4);
  REQUIRE(wrap(12, 5) == 2);
  for (int size = 1; size <= 64; ++size) {
    for (int root = 0; root < size; ++root) {
      REQUIRE(relative_rank(root, root, size) == 0);
      for (int rank = 0; rank < size; ++rank) {
        const int v = relative_rank(rank, root, size);
        REQUIRE(v >= 0);
        REQUIRE(v < size);
        REQUIRE(absolute_rank(v, root, size) == rank);
      }
    }
  }
}
