// The world-of-one transport: sends match receives by tag in posting order, either order of
// posting works, sizes must agree, and waiting on something unmatched fails at once.

#include "transport/self_transport.hpp"

#include <cohort/error.hpp>

#include <catch2/catch.hpp>

#include <chrono>
#include <numeric>
#include <vector>

using namespace cohort::transport;
using namespace std::chrono_literals;

namespace {
Deadline soon() {
  return std::chrono::steady_clock::now() + 1s;
}
}  // namespace

TEST_CASE("self transport: receive posted before or after the send", "[self]") {
  SelfTransport t;
  std::vector<int> out(100), in(100, -1);
  std::iota(out.begin(), out.end(), 7);

  const Request r = t.post_recv(0, in.data(), in.size() * sizeof(int), op_tag(1, 2, 3));
  CHECK_FALSE(t.test(r));
  const Request s = t.post_send(0, out.data(), out.size() * sizeof(int), op_tag(1, 2, 3));
  const Request both[] = {r, s};
  t.wait(both, soon(), "recv first");
  CHECK(in == out);

  std::vector<int> in2(100, -1);
  const Request s2 = t.post_send(0, out.data(), out.size() * sizeof(int), op_tag(1, 2, 4));
  const Request r2 = t.post_recv(0, in2.data(), in2.size() * sizeof(int), op_tag(1, 2, 4));
  CHECK(t.test(r2));
  CHECK(t.test(s2));
  CHECK(in2 == out);
  // Released handles are stale now.
  CHECK_THROWS_AS(t.test(r2), cohort::Error);
}

TEST_CASE("self transport: same tag matches in posting order, other tags do not match", "[self]") {
  SelfTransport t;
  int a = 1, b = 2, c = 3, got[3] = {0, 0, 0};
  const Tag tag = op_tag(0, 5, 0);
  std::vector<Request> reqs;
  reqs.push_back(t.post_send(0, &a, sizeof a, tag));
  reqs.push_back(t.post_send(0, &c, sizeof c, op_tag(0, 5, 1)));
  reqs.push_back(t.post_send(0, &b, sizeof b, tag));
  reqs.push_back(t.post_recv(0, &got[0], sizeof(int), tag));
  reqs.push_back(t.post_recv(0, &got[1], sizeof(int), tag));
  reqs.push_back(t.post_recv(0, &got[2], sizeof(int), op_tag(0, 5, 1)));
  t.wait(reqs, soon(), "ordering");
  CHECK(got[0] == 1);
  CHECK(got[1] == 2);
  CHECK(got[2] == 3);
}

TEST_CASE("self transport: zero-byte messages and an exchange waited on together", "[self]") {
  SelfTransport t;
  const Request r = t.post_recv(0, nullptr, 0, op_tag(0, 1, 0));
  const Request s = t.post_send(0, nullptr, 0, op_tag(0, 1, 0));
  const Request both[] = {r, s};
  t.wait(both, soon(), "zero bytes");

  // Receive posted first, then the send, then one wait on both.
  double x = 2.5, y = 0;
  const Request exchange[] = {t.post_recv(0, &y, sizeof y, op_tag(0, 2, 0)),
                              t.post_send(0, &x, sizeof x, op_tag(0, 2, 0))};
  t.wait(exchange, soon(), "exchange");
  CHECK(y == 2.5);
}

TEST_CASE("self transport: unmatched waits, size mismatches and bad peers are errors", "[self]") {
  SelfTransport t;
  int value = 0;
  const Request r = t.post_recv(0, &value, sizeof value, op_tag(0, 3, 0));
  try {
    t.wait(std::span<const Request>(&r, 1), soon(), "lonely op #3");
    FAIL("wait on an unmatched receive returned");
  } catch (const cohort::Error& e) {
    CHECK(e.code() == cohort::ErrorCode::Timeout);
    CHECK_THAT(e.message(), Catch::Contains("lonely op #3"));
    CHECK_THAT(e.message(), Catch::Contains("receive from rank 0"));
  }
  t.cancel_all();
  CHECK_THROWS_AS(t.test(r), cohort::Error);

  std::int64_t big = 42;
  const Request r2 = t.post_recv(0, &value, sizeof value, op_tag(0, 4, 0));
  const Request s2 = t.post_send(0, &big, sizeof big, op_tag(0, 4, 0));
  CHECK(t.test(s2));
  try {
    t.test(r2);
    FAIL("size mismatch not reported");
  } catch (const cohort::Error& e) {
    CHECK(e.code() == cohort::ErrorCode::InvalidArgument);
    CHECK_THAT(e.message(), Catch::Contains("sizes disagree"));
    CHECK_THAT(e.message(), Catch::Contains("8-byte message"));
  }

  try {
    t.post_send(1, &value, sizeof value, 0);
    FAIL("peer 1 accepted in a world of one");
  } catch (const cohort::Error& e) {
    CHECK(e.code() == cohort::ErrorCode::InvalidArgument);
    CHECK_THAT(e.message(), Catch::Contains("peer rank 1"));
  }
  CHECK_THROWS_AS(t.post_recv(0, nullptr, 4, 0), cohort::Error);
}
