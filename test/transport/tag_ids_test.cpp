// Tag-id allocation (transport/tag_ids.hpp): which id a group takes, delayed reuse, exhaustion,
// and the one-allocation-at-a-time rule for threads of one process.

#include "transport/tag_ids.hpp"

#include <catch2/catch.hpp>

#include <vector>

using namespace cohort::transport;

namespace {

TagOffer offer_with(std::initializer_list<std::uint32_t> used, std::uint32_t last) {
  TagOffer offer;
  for (std::uint32_t id : used) offer.used[id / 64] |= std::uint64_t{1} << (id % 64);
  offer.last = last;
  return offer;
}

}  // namespace

TEST_CASE("a group takes the first id free on every member after the highest last id",
          "[transport][tag_ids]") {
  // Member A uses 0, 1, 2 and last allocated 2; member B uses 0, 3 and last allocated 3. The
  // union is {0, 1, 2, 3}; the highest last is 3, so the group takes 4.
  const std::vector<TagOffer> offers{offer_with({0, 1, 2}, 2), offer_with({0, 3}, 3)};
  CHECK(TagIdPool::choose(offers) == std::optional<std::uint32_t>(4));

  // A freed id below the cursor is not reused while ids above it are free: 1 is free on both,
  // but the cursor (5) moves on to 6.
  const std::vector<TagOffer> freed{offer_with({0, 5}, 5), offer_with({0}, 2)};
  CHECK(TagIdPool::choose(freed) == std::optional<std::uint32_t>(6));
}

TEST_CASE("the cursor wraps past the last id and skips ids in use", "[transport][tag_ids]") {
  // Last allocated 2046 (kTagIds - 2); 2047 and 0 are taken (handshake, world), 1 is used by one
  // member: the group wraps around to 2.
  const std::vector<TagOffer> offers{offer_with({0, 2047, 1}, 2046), offer_with({0, 2047}, 10)};
  CHECK(TagIdPool::choose(offers) == std::optional<std::uint32_t>(2));
}

TEST_CASE("no id when every id is used by some member", "[transport][tag_ids]") {
  TagOffer full;
  full.used.fill(~std::uint64_t{0});
  full.used[7] &= ~(std::uint64_t{1} << 9);  // id 7 * 64 + 9 = 457 free on this member...
  const std::vector<TagOffer> offers{full, offer_with({457}, 0)};  // ...but used on the other
  CHECK_FALSE(TagIdPool::choose(offers).has_value());
  const std::vector<TagOffer> alone{full};
  CHECK(TagIdPool::choose(alone) == std::optional<std::uint32_t>(457));
}

TEST_CASE("a pool claims, releases, and serialises allocations", "[transport][tag_ids]") {
  TagIdPool pool;
  TagOffer first = pool.offer();
  REQUIRE_FALSE(first.busy);
  // The world's id and the handshake's are taken from the start.
  CHECK((first.used[0] & 1u) == 1u);
  CHECK((first.used[kTagMaskWords - 1] >> 63) == 1u);
  CHECK(first.last == 0);

  // While `first` is open, another thread's offer is busy and full: its group cannot choose.
  const TagOffer second = pool.offer();
  CHECK(second.busy);
  const std::vector<TagOffer> blocked{second};
  CHECK_FALSE(TagIdPool::choose(blocked).has_value());
  pool.finish(second, std::nullopt);

  const std::vector<TagOffer> mine{first};
  const std::optional<std::uint32_t> id = TagIdPool::choose(mine);
  REQUIRE(id == std::optional<std::uint32_t>(1));
  pool.finish(first, id);

  // Claimed: the next offer shows it in use and remembers it as the last allocated.
  TagOffer third = pool.offer();
  CHECK_FALSE(third.busy);
  CHECK(((third.used[0] >> 1) & 1u) == 1u);
  CHECK(third.last == 1);
  pool.finish(third, std::nullopt);

  {
    // A claim releases its id when it goes.
    TagIdClaim claim(std::shared_ptr<TagIdPool>(&pool, [](TagIdPool*) {}), 1);
    CHECK(claim.id() == 1);
  }
  TagOffer fourth = pool.offer();
  CHECK(((fourth.used[0] >> 1) & 1u) == 0u);
  pool.finish(fourth, std::nullopt);
}
