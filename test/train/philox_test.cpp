// Philox4x32-10 against Random123's published known answers, and derive_seed's contract: its
// counter/key layout pinned by those same answers and by a layout written out word by word here,
// distinct values over many (seed, stream, index), and every input bit reaching the output.

#include <cohort/train/random.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <unordered_set>

namespace {

using cohort::train::derive_seed;
using cohort::train::philox4x32_10;
using Words = std::array<std::uint32_t, 4>;

TEST_CASE("philox4x32_10 reproduces Random123's known answers", "[train][random]") {
  // Random123's kat_vectors, philox4x32_10 lines: counter, key -> output.
  CHECK(philox4x32_10({0, 0, 0, 0}, {0, 0}) ==
        Words{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8});
  CHECK(philox4x32_10({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff}) ==
        Words{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd});
  // The digits of pi.
  CHECK(philox4x32_10({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}) ==
        Words{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1});
}

TEST_CASE("derive_seed is the first 64 bits of Philox over (index, stream) under the seed",
          "[train][random]") {
  SECTION("the known answers, read as 64-bit seed, stream and index (low word first)") {
    CHECK(derive_seed(0, 0, 0) == 0xe169c58d6627e8d5);
    CHECK(derive_seed(~0ull, ~0ull, ~0ull) == 0x41c83b0e408f276d);
    // pi: counter words (index lo, index hi, stream lo, stream hi), key words (seed lo, seed hi).
    CHECK(derive_seed(/*seed=*/0x299f31d0a4093822, /*stream=*/0x0370734413198a2e,
                      /*index=*/0x85a308d3243f6a88) == 0x94fdccebd16cfe09);
  }
  SECTION("a layout with every word distinct, written out by hand") {
    const std::uint64_t seed = 0x0123456789abcdef;
    const std::uint64_t stream = 0xfedcba9876543210;
    const std::uint64_t index = 0x0f1e2d3c4b5a6978;
    const Words out =
        philox4x32_10({0x4b5a6978, 0x0f1e2d3c, 0x76543210, 0xfedcba98}, {0x89abcdef, 0x01234567});
    CHECK(derive_seed(seed, stream, index) == (std::uint64_t{out[1]} << 32 | out[0]));
    // Stream and index are not interchangeable.
    CHECK(derive_seed(seed, index, stream) != derive_seed(seed, stream, index));
  }
}

TEST_CASE("derive_seed gives distinct values over many seeds, streams and indices",
          "[train][random]") {
  // 4 seeds x 32 streams x 512 indices = 65536 draws; a chance collision among them has
  // probability about 2^-33, so any repeat means the inputs are not all reaching the counter.
  std::unordered_set<std::uint64_t> seen;
  std::size_t draws = 0;
  for (std::uint64_t seed : {0ull, 1ull, 42ull, 0x8000000000000000ull}) {
    for (std::uint64_t stream = 0; stream < 32; ++stream) {
      for (std::uint64_t index = 0; index < 512; ++index) {
        seen.insert(derive_seed(seed, stream, index));
        ++draws;
      }
    }
  }
  CHECK(seen.size() == draws);

  // Around the 32-bit boundary of each 64-bit argument (where the high word takes over).
  std::unordered_set<std::uint64_t> boundary;
  const std::uint64_t edges[] = {0xfffffffe, 0xffffffff, 0x100000000, 0x100000001};
  for (std::uint64_t a : edges) {
    boundary.insert(derive_seed(a, 0, 0));
    boundary.insert(derive_seed(0, a, 0));
    boundary.insert(derive_seed(0, 0, a));
  }
  CHECK(boundary.size() == 3 * std::size(edges));
}

TEST_CASE("every input bit of derive_seed reaches about half of the output bits",
          "[train][random]") {
  // Flip each of the 192 input bits of one base point and count the output bits that change.
  // An ideal mix changes 32 on average (standard deviation 4 per flip, so about 0.3 for the
  // mean of 192 flips); a dropped word or a weak round would pull some flips to 0.
  const std::uint64_t seed = 0x5deece66d, stream = 7, index = 1000;
  const std::uint64_t base = derive_seed(seed, stream, index);
  int total = 0;
  int weakest = 64;
  for (int bit = 0; bit < 64; ++bit) {
    const std::uint64_t flip = std::uint64_t{1} << bit;
    for (std::uint64_t changed :
         {derive_seed(seed ^ flip, stream, index), derive_seed(seed, stream ^ flip, index),
          derive_seed(seed, stream, index ^ flip)}) {
      const int distance = std::popcount(base ^ changed);
      total += distance;
      weakest = std::min(weakest, distance);
    }
  }
  const double mean = total / 192.0;
  CHECK(mean > 30.0);
  CHECK(mean < 34.0);
  CHECK(weakest >= 12);
}

}  // namespace
