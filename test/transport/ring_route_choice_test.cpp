// RingRouteChoice (transport/ring_route_choice.hpp): the size classes' bounds, the sender's
// trials (alternating, spread first), its verdict from hand-computed medians either way, the
// receiver's medians published once, and the spread kept when no verdict comes.

#include "transport/ring_route_choice.hpp"

#include <catch2/catch.hpp>

namespace {

using cohort::transport::RingRouteChoice;
using Route = RingRouteChoice::Route;

}  // namespace

TEST_CASE("route choice: size classes by powers of two from 32 KiB (exclusive) to 512 KiB",
          "[route_choice]") {
  CHECK(RingRouteChoice::class_of(0) == -1);
  CHECK(RingRouteChoice::class_of(32768) == -1);
  CHECK(RingRouteChoice::class_of(32769) == 0);
  CHECK(RingRouteChoice::class_of(65536) == 0);
  CHECK(RingRouteChoice::class_of(65537) == 1);
  CHECK(RingRouteChoice::class_of(131072) == 1);
  CHECK(RingRouteChoice::class_of(131073) == 2);
  CHECK(RingRouteChoice::class_of(262144) == 2);
  CHECK(RingRouteChoice::class_of(262145) == 3);
  CHECK(RingRouteChoice::class_of(524288) == 3);
  CHECK(RingRouteChoice::class_of(524289) == -1);
}

TEST_CASE("route choice: trials alternate spread first, per class, until the verdict",
          "[route_choice]") {
  RingRouteChoice choice;
  for (int i = 0; i < 6; ++i) {
    CHECK(choice.next(1) == (i % 2 == 0 ? Route::Spread : Route::Rendezvous));
    CHECK_FALSE(choice.settled(1));
  }
  // Another class has its own count.
  CHECK(choice.next(3) == Route::Spread);
  CHECK(choice.next(3) == Route::Rendezvous);
  CHECK(choice.next(1) == Route::Spread);  // the seventh of class 1
}

TEST_CASE("route choice: the verdict sums the two copies of a spread against the rendezvous",
          "[route_choice]") {
  // Copy in: 8 timings whose median (lower and upper middle 5000 and 7000) is 6000 ns.
  const std::uint64_t copy_in[] = {9000, 5000, 1000, 7000, 200000, 3000, 8000, 4000};
  SECTION("rendezvous dearer than 6000 + 4000: spread") {
    RingRouteChoice choice;
    for (const auto ns : copy_in) choice.sent_spread(0, ns);
    CHECK_FALSE(choice.wants_send_timing(0));
    REQUIRE(choice.decide(0, {4000, 10001}));
    CHECK(choice.settled(0));
    CHECK(choice.median_copy_in(0) == 6000);
    for (int i = 0; i < 5; ++i) CHECK(choice.next(0) == Route::Spread);
    CHECK_FALSE(choice.decide(0, {1, 1}));  // once
    CHECK(choice.next(0) == Route::Spread);
  }
  SECTION("rendezvous cheaper than 6000 + 4000: rendezvous") {
    RingRouteChoice choice;
    for (const auto ns : copy_in) choice.sent_spread(2, ns);
    REQUIRE(choice.decide(2, {4000, 9999}));
    for (int i = 0; i < 5; ++i) CHECK(choice.next(2) == Route::Rendezvous);
    CHECK_FALSE(choice.settled(1));  // other classes untouched
  }
  SECTION("equal: spread (no round trip, and the send completes at once)") {
    RingRouteChoice choice;
    for (const auto ns : copy_in) choice.sent_spread(3, ns);
    REQUIRE(choice.decide(3, {4000, 10000}));
    CHECK(choice.next(3) == Route::Spread);
  }
  SECTION("no verdict before the sender holds its own timings") {
    RingRouteChoice choice;
    for (int i = 0; i < RingRouteChoice::kTrials - 1; ++i) choice.sent_spread(1, 100);
    CHECK(choice.wants_send_timing(1));
    CHECK_FALSE(choice.decide(1, {100, 1}));
    CHECK_FALSE(choice.settled(1));
    choice.sent_spread(1, 100);
    CHECK(choice.decide(1, {100, 1}));
    CHECK(choice.next(1) == Route::Rendezvous);
  }
}

TEST_CASE("route choice: a class without a verdict after kMaxTrials sends stays spread",
          "[route_choice]") {
  RingRouteChoice choice;
  for (int i = 0; i < RingRouteChoice::kMaxTrials; ++i) choice.next(2);
  CHECK(choice.settled(2));
  for (int i = 0; i < 4; ++i) CHECK(choice.next(2) == Route::Spread);
}

TEST_CASE("route choice: the receiver publishes each class's medians once both ways are timed",
          "[route_choice]") {
  RingRouteChoice choice;
  // Spread copies out 1..8 us (median 4500 ns), rendezvous 10, 30, 20, ... (median 45000).
  for (int i = 0; i < RingRouteChoice::kTrials; ++i) {
    REQUIRE(choice.wants_receive_timing(1, Route::Spread));
    CHECK_FALSE(choice.received(1, Route::Spread, 1000u * static_cast<unsigned>(i + 1)));
  }
  CHECK_FALSE(choice.wants_receive_timing(1, Route::Spread));
  CHECK(choice.wants_receive_timing(1, Route::Rendezvous));
  const std::uint64_t rendezvous[] = {10000, 30000, 20000, 80000, 50000, 40000, 70000};
  for (const auto ns : rendezvous) CHECK_FALSE(choice.received(1, Route::Rendezvous, ns));
  // A further spread timing changes nothing.
  CHECK_FALSE(choice.received(1, Route::Spread, 1));
  const auto medians = choice.received(1, Route::Rendezvous, 60000);
  REQUIRE(medians);
  CHECK(medians->spread_copy_out == 4500);
  CHECK(medians->rendezvous_copy == 45000);
  CHECK_FALSE(choice.wants_receive_timing(1, Route::Rendezvous));
  CHECK_FALSE(choice.received(1, Route::Rendezvous, 5));  // published once
  CHECK(choice.wants_receive_timing(0, Route::Spread));   // other classes still timed
}
