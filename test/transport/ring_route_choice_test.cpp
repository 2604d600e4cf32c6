// RingRouteChoice (transport/ring_route_choice.hpp): the size classes' bounds, the sender's
// trials (blocks of each way in turn, spread first), its verdict either way, the receiver's
// hand-computed medians published once, and the spread kept when no verdict comes.

#include "transport/ring_route_choice.hpp"

#include <catch2/catch.hpp>

#include <cstdint>
#include <optional>

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

TEST_CASE(
    "route choice: trials go in blocks of each way, spread first, per class, until the "
    "verdict",
    "[route_choice]") {
  constexpr int kBlock = RingRouteChoice::kTrials;
  RingRouteChoice choice;
  for (int i = 0; i < 3 * kBlock; ++i) {
    CHECK(choice.next(1) == (i / kBlock == 1 ? Route::Rendezvous : Route::Spread));
    CHECK_FALSE(choice.settled(1));
  }
  // Another class has its own count.
  CHECK(choice.next(3) == Route::Spread);
  CHECK(choice.next(1) == Route::Rendezvous);  // the fourth block of class 1
}

TEST_CASE("route choice: the verdict takes the way whose receives took less, the spread by a tenth",
          "[route_choice]") {
  SECTION("rendezvous faster: rendezvous, from then on, once") {
    RingRouteChoice choice;
    CHECK(choice.next(2) == Route::Spread);
    REQUIRE(choice.decide(2, {10001, 10000}));
    CHECK(choice.settled(2));
    for (int i = 0; i < 5; ++i) CHECK(choice.next(2) == Route::Rendezvous);
    CHECK_FALSE(choice.decide(2, {1, 100000}));  // once
    CHECK(choice.next(2) == Route::Rendezvous);
    CHECK_FALSE(choice.settled(1));  // other classes untouched
    CHECK(choice.next(1) == Route::Spread);
  }
  SECTION("spread at 0.9 of the rendezvous's time: spread") {
    RingRouteChoice choice;
    REQUIRE(choice.decide(0, {9000, 10000}));
    for (int i = 0; i < 5; ++i) CHECK(choice.next(0) == Route::Spread);
  }
  SECTION("spread faster, but by less than a tenth: rendezvous") {
    RingRouteChoice choice;
    REQUIRE(choice.decide(3, {9001, 10000}));
    CHECK(choice.next(3) == Route::Rendezvous);
  }
}

TEST_CASE("route choice: a rank that times the other direction too counts both, so a pair agrees",
          "[route_choice]") {
  // Messages to the peer: spread 9000 ns, rendezvous 10000 (spread wins alone, at 0.9). Messages
  // from it: spread 13000, rendezvous 12000. Both directions: 22000 against 22000, above 0.9:
  // the rendezvous, which the peer computes from the same four medians.
  const auto receive = [](RingRouteChoice& choice, int c, std::uint64_t spread,
                          std::uint64_t rendezvous) {
    for (int i = 0; i < RingRouteChoice::kTrials; ++i) {
      choice.received(c, Route::Spread, spread);
      choice.received(c, Route::Rendezvous, rendezvous);
    }
  };
  RingRouteChoice alone, both, peer;
  REQUIRE(alone.decide(1, {9000, 10000}));
  CHECK(alone.next(1) == Route::Spread);
  receive(both, 1, 13000, 12000);
  REQUIRE(both.own_timings(1));
  REQUIRE(both.decide(1, {9000, 10000}));
  CHECK(both.next(1) == Route::Rendezvous);
  receive(peer, 1, 9000, 10000);
  REQUIRE(peer.decide(1, {13000, 12000}));
  CHECK(peer.next(1) == Route::Rendezvous);
  CHECK_FALSE(alone.own_timings(2));
}

TEST_CASE(
    "route choice: a rank still timing the other direction waits for it, up to half the "
    "trials",
    "[route_choice]") {
  RingRouteChoice choice;
  choice.received(0, Route::Spread, 13000);  // timing under way, not complete
  CHECK(choice.timing_under_way(0));
  CHECK_FALSE(choice.timing_under_way(1));
  int sent = 0;
  for (; sent < RingRouteChoice::kMaxTrials / 2; ++sent) {
    CHECK_FALSE(choice.decide(0, {9000, 10000}));
    choice.next(0);
  }
  // Half the trials gone: the peer's medians alone (spread at 0.9).
  REQUIRE(choice.decide(0, {9000, 10000}));
  CHECK(choice.next(0) == Route::Spread);
  // Once complete, this rank's medians join, and it no longer waits.
  RingRouteChoice other;
  for (int i = 0; i < RingRouteChoice::kTrials; ++i) {
    CHECK(other.timing_under_way(3) == (i > 0));
    other.received(3, Route::Spread, 40000);
    other.received(3, Route::Rendezvous, 10000);
  }
  CHECK_FALSE(other.timing_under_way(3));
  REQUIRE(other.decide(3, {9000, 10000}));  // 49000 against 20000
  CHECK(other.next(3) == Route::Rendezvous);
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
  CHECK(choice.wants_receive_timing(1));
  // Spread receives took 1..8 us (median: the mean of 4000 and 5000), rendezvous ones 10, 30,
  // 20, ... us (median: the mean of 40000 and 50000).
  for (int i = 0; i < RingRouteChoice::kTrials; ++i) {
    REQUIRE(choice.wants_receive_timing(1, Route::Spread));
    CHECK_FALSE(choice.received(1, Route::Spread, 1000u * static_cast<unsigned>(i + 1)));
  }
  CHECK_FALSE(choice.wants_receive_timing(1, Route::Spread));
  CHECK(choice.wants_receive_timing(1, Route::Rendezvous));
  CHECK(choice.wants_receive_timing(1));
  const std::uint64_t rendezvous[] = {10000, 30000, 20000, 80000, 50000, 40000, 70000};
  for (const auto ns : rendezvous) CHECK_FALSE(choice.received(1, Route::Rendezvous, ns));
  // A further spread timing changes nothing.
  CHECK_FALSE(choice.received(1, Route::Spread, 1));
  const auto medians = choice.received(1, Route::Rendezvous, 60000);
  REQUIRE(medians);
  CHECK(medians->spread == 4500);
  CHECK(medians->rendezvous == 45000);
  CHECK_FALSE(choice.wants_receive_timing(1));
  CHECK_FALSE(choice.received(1, Route::Rendezvous, 5));  // published once
  CHECK(choice.wants_receive_timing(0, Route::Spread));   // other classes still timed
}

TEST_CASE("route choice: a median is robust to one preempted receive", "[route_choice]") {
  RingRouteChoice choice;
  // 8 spread timings, one of a receive whose process was preempted for 50 ms.
  const std::uint64_t spread[] = {3000, 50000000, 1000, 4000, 2000, 6000, 5000, 7000};
  for (const auto ns : spread) choice.received(0, Route::Spread, ns);
  std::optional<RingRouteChoice::ReceiverTimings> medians;
  for (int i = 0; i < RingRouteChoice::kTrials; ++i)
    medians = choice.received(0, Route::Rendezvous, 4500);
  REQUIRE(medians);
  // Sorted: 1000 2000 3000 4000 5000 6000 7000 50000000: the middles 4000 and 5000.
  CHECK(medians->spread == 4500);
  CHECK(medians->rendezvous == 4500);
}
