// RankSizes: per-rank sizes kept in place up to kInline ranks, on the heap beyond. Expected
// values are written out by hand; each case crosses the in-place/heap boundary both ways.

#include "core/rank_sizes.hpp"

#include <catch2/catch.hpp>

#include <span>
#include <utility>
#include <vector>

using cohort::RankSizes;

namespace {

std::vector<std::size_t> as_vector(const RankSizes& sizes) {
  return {sizes.begin(), sizes.end()};
}

}  // namespace

TEST_CASE("RankSizes holds n copies, any contiguous sizes, and converts to a span", "[ranks]") {
  CHECK(as_vector(RankSizes(3, 7)) == std::vector<std::size_t>{7, 7, 7});
  CHECK(as_vector(RankSizes(0, 7)).empty());
  const std::vector<std::size_t> ten{0, 1, 2, 3, 4, 5, 6, 7, 8, 9};  // beyond kInline
  const RankSizes from_vector = ten;
  CHECK(from_vector.size() == 10);
  CHECK(as_vector(from_vector) == ten);
  const std::span<const std::size_t> view = from_vector;
  CHECK(view[9] == 9);
  CHECK(from_vector.back() == 9);
  CHECK(as_vector(RankSizes{4, 5}) == std::vector<std::size_t>{4, 5});
}

TEST_CASE("RankSizes grows past its in-place entries keeping what it held", "[ranks]") {
  RankSizes sizes;
  std::vector<std::size_t> expected;
  for (std::size_t i = 0; i < 20; ++i) {
    sizes.push_back(i * 3);
    expected.push_back(i * 3);
    REQUIRE(as_vector(sizes) == expected);
  }
  sizes.resize(25);  // new entries are zero
  expected.resize(25, 0);
  CHECK(as_vector(sizes) == expected);
  sizes.resize(2);
  CHECK(as_vector(sizes) == std::vector<std::size_t>{0, 3});
}

TEST_CASE("RankSizes assign replaces every entry, in place and past it", "[ranks]") {
  RankSizes sizes{1, 2, 3};
  sizes.assign(2, 5);  // shorter: the old third entry is gone
  CHECK(as_vector(sizes) == std::vector<std::size_t>{5, 5});
  sizes.assign(10, 4);  // beyond kInline
  CHECK(as_vector(sizes) == std::vector<std::size_t>(10, 4));
  sizes.assign(3, 0);  // back within kInline, still on the heap
  CHECK(as_vector(sizes) == std::vector<std::size_t>{0, 0, 0});
  sizes.assign(0, 9);
  CHECK(sizes.empty());
}

TEST_CASE("RankSizes copies and moves, in place and on the heap", "[ranks]") {
  for (const std::size_t n : {std::size_t{3}, std::size_t{12}}) {
    INFO(n << " entries");
    RankSizes original;
    for (std::size_t i = 0; i < n; ++i) original.push_back(100 + i);
    const std::vector<std::size_t> expected = as_vector(original);

    RankSizes copy = original;
    copy[0] = 1;  // the copy is its own storage
    CHECK(original[0] == 100);
    copy = original;
    CHECK(as_vector(copy) == expected);
    CHECK(copy == original);

    RankSizes moved = std::move(copy);
    CHECK(as_vector(moved) == expected);
    CHECK(copy.empty());  // NOLINT(bugprone-use-after-move): moved-from is empty, by contract
    copy.push_back(5);    // and usable
    CHECK(as_vector(copy) == std::vector<std::size_t>{5});

    RankSizes assigned(2, 9);
    assigned = std::move(moved);
    CHECK(as_vector(assigned) == expected);

    RankSizes small(1, 4);
    small = original;  // a heap-held copy into one in place, and back
    CHECK(as_vector(small) == expected);
    small = RankSizes(1, 4);
    CHECK(as_vector(small) == std::vector<std::size_t>{4});
  }
}
