// The wait policy (pure) and the request table's generation checks.

#include "transport/wait_policy.hpp"
#include "transport/request_table.hpp"

#include <catch2/catch.hpp>

#include <string>

using namespace cohort::transport;
using namespace std::chrono_literals;

TEST_CASE("ranks with a core each spin longer and do not yield", "[wait_policy]") {
  const WaitPolicy policy = choose_wait_policy(2, 8, std::nullopt);
  CHECK(policy.spin == 200us);
  CHECK_FALSE(policy.yield_while_spinning);
  CHECK(choose_wait_policy(8, 8, std::nullopt).spin == 200us);
}

TEST_CASE("oversubscribed ranks spin briefly and yield", "[wait_policy]") {
  const WaitPolicy policy = choose_wait_policy(8, 2, std::nullopt);
  CHECK(policy.spin == 20us);
  CHECK(policy.yield_while_spinning);
  // Unknown hardware concurrency (0) counts as one thread.
  CHECK(choose_wait_policy(2, 0, std::nullopt).yield_while_spinning);
  CHECK_FALSE(choose_wait_policy(1, 0, std::nullopt).yield_while_spinning);
}

TEST_CASE("COHORT_SPIN_US overrides the budget but not the yield decision", "[wait_policy]") {
  const WaitPolicy policy = choose_wait_policy(8, 2, 0us);
  CHECK(policy.spin == 0us);
  CHECK(policy.yield_while_spinning);
  CHECK(choose_wait_policy(1, 4, 5000us).spin == 5000us);
}

TEST_CASE("request table detects stale handles through the generation", "[request_table]") {
  RequestTable<std::string> table;
  const Request a = table.insert("a");
  const Request b = table.insert("b");
  REQUIRE(table.find(a) != nullptr);
  CHECK(*table.find(a) == "a");
  CHECK(*table.find(b) == "b");
  CHECK(table.live() == 2);

  table.release(a);
  CHECK(table.find(a) == nullptr);
  const Request c = table.insert("c");  // reuses a's slot
  CHECK(c.slot == a.slot);
  CHECK(c.generation != a.generation);
  CHECK(table.find(a) == nullptr);
  CHECK(*table.find(c) == "c");

  CHECK(table.find(Request{}) == nullptr);
  CHECK(table.find(Request{99, 0}) == nullptr);
  table.clear();
  CHECK(table.live() == 0);
  CHECK(table.find(b) == nullptr);
  CHECK(table.find(c) == nullptr);
}
