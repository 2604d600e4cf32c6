// Balanced blocks must tile [0, total) exactly, in order, with sizes differing by at most one.

#include "patterns/block_partition.hpp"

#include <catch2/catch.hpp>

#include <cstddef>

using cohort::patterns::balanced_block;
using cohort::patterns::balanced_offset;
using cohort::patterns::pieces_needed;

TEST_CASE("balanced blocks tile the range in order", "[patterns]") {
  for (std::size_t parts = 1; parts <= 64; ++parts) {
    for (std::size_t total : {0u, 1u, 2u, 7u, 63u, 64u, 65u, 1000u, 1031u, 262147u}) {
      std::size_t next = 0;
      std::size_t smallest = total + 1, largest = 0;
      for (std::size_t i = 0; i < parts; ++i) {
        const auto block = balanced_block(total, parts, i);
        REQUIRE(block.offset == next);
        REQUIRE(balanced_offset(total, parts, i) == block.offset);
        next += block.count;
        smallest = std::min(smallest, block.count);
        largest = std::max(largest, block.count);
      }
      REQUIRE(next == total);
      REQUIRE(balanced_offset(total, parts, parts) == total);
      REQUIRE(largest - smallest <= 1);
    }
  }
}

TEST_CASE("the longer blocks come first", "[patterns]") {
  // 10 into 4: 3, 3, 2, 2
  REQUIRE(balanced_block(10, 4, 0).count == 3);
  REQUIRE(balanced_block(10, 4, 1).count == 3);
  REQUIRE(balanced_block(10, 4, 2).count == 2);
  REQUIRE(balanced_block(10, 4, 3).offset == 8);
  // Fewer elements than parts: the tail blocks are empty and sit at the end.
  REQUIRE(balanced_block(2, 5, 1).count == 1);
  REQUIRE(balanced_block(2, 5, 4).count == 0);
  REQUIRE(balanced_block(2, 5, 4).offset == 2);
}

TEST_CASE("pieces_needed covers the total with pieces no larger than the limit", "[patterns]") {
  REQUIRE(pieces_needed(0, 4) == 1);
  REQUIRE(pieces_needed(1, 4) == 1);
  REQUIRE(pieces_needed(4, 4) == 1);
  REQUIRE(pieces_needed(5, 4) == 2);
  for (std::size_t total = 0; total < 300; ++total) {
    for (std::size_t limit = 1; limit < 40; ++limit) {
      const std::size_t n = pieces_needed(total, limit);
      REQUIRE(balanced_block(total, n, 0).count <= limit);
      if (n > 1) REQUIRE((n - 1) * limit < total);
    }
  }
}
