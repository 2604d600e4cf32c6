// ranks_span_hosts: every rank of a world learns alike whether their host identities differ,
// through a store. Ranks are threads over one in-process store, started together, so the order
// they arrive in is the scheduler's; the odd identity is put at every position in turn.

#include "transport/host_span.hpp"

#include <cohort/environment.hpp>
#include <cohort/error.hpp>
#include <cohort/store.hpp>

#include <catch2/catch.hpp>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace std::chrono_literals;
using cohort::transport::forget_host_span;
using cohort::transport::ranks_span_hosts;

/// Each identity's verdict, one thread per rank, all calling at once.
std::vector<int> verdicts(cohort::Store& store, const std::string& prefix,
                          const std::vector<std::string>& identities) {
  const int size = static_cast<int>(identities.size());
  std::vector<int> seen(identities.size(), -1);
  std::vector<std::thread> ranks;
  for (std::size_t r = 0; r < identities.size(); ++r)
    ranks.emplace_back(
        [&, r] { seen[r] = ranks_span_hosts(store, prefix, identities[r], size, 10s) ? 1 : 0; });
  for (auto& rank : ranks) rank.join();
  return seen;
}

}  // namespace

TEST_CASE("ranks_span_hosts: one host, several hosts, any rank the odd one", "[transport]") {
  auto store = cohort::make_local_store();
  SECTION("every rank on one host") {
    for (int size : {2, 3, 5}) {
      CAPTURE(size);
      const auto seen = verdicts(*store, "one" + std::to_string(size),
                                 std::vector<std::string>(static_cast<std::size_t>(size), "a"));
      CHECK(seen == std::vector<int>(static_cast<std::size_t>(size), 0));
    }
  }
  SECTION("one rank elsewhere, whichever it is") {
    for (std::size_t odd = 0; odd < 5; ++odd) {
      CAPTURE(odd);
      std::vector<std::string> identities(5, "a");
      identities[odd] = "b";
      CHECK(verdicts(*store, "odd" + std::to_string(odd), identities) == std::vector<int>(5, 1));
    }
  }
  SECTION("two hosts of two and an uneven three") {
    CHECK(verdicts(*store, "two", {"a", "b", "a", "b"}) == std::vector<int>(4, 1));
    CHECK(verdicts(*store, "three", {"a", "b", "c"}) == std::vector<int>(3, 1));
  }
}

TEST_CASE("ranks_span_hosts: a world of one asks nothing; the keys go with forget_host_span",
          "[transport]") {
  auto store = cohort::make_local_store();
  CHECK_FALSE(ranks_span_hosts(*store, "w", "a", 1, 1s));
  CHECK(store->num_keys() == 0);
  CHECK(verdicts(*store, "w", {"a", "b", "a"}) == std::vector<int>(3, 1));
  CHECK(store->num_keys() > 0);
  forget_host_span(*store, "w");
  CHECK(store->num_keys() == 0);
  // The prefix is free again for a world of other hosts.
  CHECK(verdicts(*store, "w", {"c", "c"}) == std::vector<int>(2, 0));
}

TEST_CASE("ranks_span_hosts: a rank that never comes fails the others at their deadline",
          "[transport]") {
  auto store = cohort::make_local_store();
  try {
    ranks_span_hosts(*store, "late", "a", 2, 200ms);
    FAIL("returned without the second rank");
  } catch (const cohort::Error& e) {
    CHECK(e.code() == cohort::ErrorCode::Timeout);
    CHECK_THAT(e.what(), Catch::Matchers::Contains("1 of 2 ranks arrived"));
    CHECK_THAT(e.what(), Catch::Matchers::Contains("late/host_span/verdict"));
  }
}
