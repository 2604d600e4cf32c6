// The policy of the cache of freed mappable allocations (core/mappable_cache.hpp) on made-up
// blocks: which kept block serves a request, which leave when it is full, and that a forked
// child never reuses its parent's. Nothing here maps memory (peer_mappings_test does).

#include "core/mappable_cache.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace {

using cohort::CachedMappable;
using cohort::MappableCache;

constexpr pid_t kMe = 100;
constexpr pid_t kParent = 99;

/// A block told apart by `id` (its descriptor and the low bits of its address).
CachedMappable block(int id, std::size_t bytes, pid_t owner = kMe) {
  return CachedMappable{reinterpret_cast<void*>(static_cast<std::uintptr_t>(id) << 12),
                        bytes,
                        id,
                        static_cast<std::uint64_t>(1000 + id),
                        7,
                        owner};
}

std::vector<int> ids(const MappableCache::Released& released) {
  std::vector<int> result;
  for (std::size_t i = 0; i < released.count; ++i) result.push_back(released.blocks[i].fd);
  return result;
}

}  // namespace

TEST_CASE("the smallest kept block of at least the size and at most a quarter more serves") {
  MappableCache cache;
  MappableCache::Released released;
  cache.keep(block(1, 4096), 1 << 30, released);
  cache.keep(block(2, 10 * 4096), 1 << 30, released);
  cache.keep(block(3, 8 * 4096), 1 << 30, released);
  cache.keep(block(4, 9 * 4096), 1 << 30, released);
  REQUIRE(released.count == 0);
  CHECK(cache.bytes() == 28 * 4096);

  MappableCache::Released foreign;
  // 8 pages: blocks 3 (8), 4 (9) and 2 (10) all fit; 3 is the smallest.
  auto taken = cache.take(8 * 4096, kMe, foreign);
  REQUIRE(taken);
  CHECK(taken->fd == 3);
  CHECK(cache.bytes() == 20 * 4096);
  // 7 pages: at most 8.75 pages may serve, and block 3 is gone: none.
  CHECK_FALSE(cache.take(7 * 4096, kMe, foreign));
  // 11 pages: nothing kept is that large.
  CHECK_FALSE(cache.take(11 * 4096, kMe, foreign));
  // 8 pages again: block 4 (9 pages, within a quarter more).
  taken = cache.take(8 * 4096, kMe, foreign);
  REQUIRE(taken);
  CHECK(taken->fd == 4);
  CHECK(taken->bytes == 9 * 4096);
  CHECK(cache.size() == 2);
  CHECK(foreign.count == 0);
}

TEST_CASE("a full cache lets the longest-kept blocks go first") {
  MappableCache cache;
  MappableCache::Released released;
  cache.keep(block(1, 3000), 10000, released);
  cache.keep(block(2, 3000), 10000, released);
  cache.keep(block(3, 3000), 10000, released);
  REQUIRE(released.count == 0);
  // 9000 kept: 4001 more needs two to leave (one would leave exactly 10001), 1 then 2.
  cache.keep(block(4, 4001), 10000, released);
  CHECK(ids(released) == std::vector<int>{1, 2});
  CHECK(cache.bytes() == 7001);
  CHECK(cache.size() == 2);

  SECTION("a block over the whole limit is not kept, and nothing leaves for it") {
    MappableCache::Released more;
    cache.keep(block(5, 10001), 10000, more);
    CHECK(ids(more) == std::vector<int>{5});
    CHECK(cache.size() == 2);
  }
  SECTION("a limit of 0 keeps nothing") {
    MappableCache::Released more;
    cache.keep(block(5, 1), 0, more);
    CHECK(ids(more) == std::vector<int>{5});
  }
  SECTION("drain hands back everything") {
    MappableCache::Released all;
    cache.drain(all);
    std::vector<int> got = ids(all);
    std::sort(got.begin(), got.end());
    CHECK(got == std::vector<int>{3, 4});
    CHECK(cache.size() == 0);
    CHECK(cache.bytes() == 0);
  }
}

TEST_CASE("at most kMaxBlocks are kept, however small") {
  MappableCache cache;
  MappableCache::Released released;
  for (int i = 0; i < static_cast<int>(MappableCache::kMaxBlocks); ++i)
    cache.keep(block(i, 4096), 1 << 30, released);
  REQUIRE(released.count == 0);
  cache.keep(block(99, 4096), 1 << 30, released);
  CHECK(ids(released) == std::vector<int>{0});  // the first kept
  CHECK(cache.size() == MappableCache::kMaxBlocks);
}

TEST_CASE("a forked child's take hands its parent's blocks back instead of reusing them") {
  MappableCache cache;
  MappableCache::Released released;
  cache.keep(block(1, 4096, kParent), 1 << 30, released);
  cache.keep(block(2, 4096, kMe), 1 << 30, released);
  MappableCache::Released foreign;
  const auto taken = cache.take(4096, kMe, foreign);
  REQUIRE(taken);
  CHECK(taken->fd == 2);
  CHECK(ids(foreign) == std::vector<int>{1});
  CHECK(cache.size() == 0);
  // Only the parent's left: nothing for this process.
  cache.keep(block(3, 4096, kParent), 1 << 30, released);
  MappableCache::Released more;
  CHECK_FALSE(cache.take(4096, kMe, more));
  CHECK(ids(more) == std::vector<int>{3});
}
