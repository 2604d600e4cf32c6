// MeasuredChoice's schedule and decision, with times given by hand: which algorithm each call
// runs, when the ranks must vote, what they decide, and when the measurement starts again.

#include "algorithms/measured_choice.hpp"

#include <catch2/catch.hpp>

#include <array>
#include <vector>

namespace {

using cohort::algorithms::MeasuredChoice;
using Which = MeasuredChoice::Which;

/// Runs the four trial calls with these seconds (table, alternative, table, alternative).
void trials(MeasuredChoice& m, std::array<double, 4> seconds) {
  for (double s : seconds) {
    REQUIRE_FALSE(m.vote_due());
    m.record(s);
  }
}

}  // namespace

TEST_CASE("measured choice: the trials alternate, table first, then a vote is due", "[unit]") {
  MeasuredChoice m;
  std::vector<Which> order;
  for (int i = 0; i < 4; ++i) {
    REQUIRE_FALSE(m.vote_due());
    order.push_back(m.next());
    m.record(1.0);
  }
  CHECK(order == std::vector<Which>{MeasuredChoice::kTable, MeasuredChoice::kAlternative,
                                    MeasuredChoice::kTable, MeasuredChoice::kAlternative});
  CHECK(m.vote_due());
  CHECK(m.chosen() == MeasuredChoice::kTable);
}

TEST_CASE("measured choice: each vote is the best of that algorithm's two calls", "[unit]") {
  MeasuredChoice m;
  trials(m, {0.012, 0.009, 0.010, 0.011});
  CHECK(m.vote() == std::array<double, 2>{0.010, 0.009});
}

TEST_CASE("measured choice: the alternative wins only below 0.9 of the table's time", "[unit]") {
  SECTION("0.85 of it: the alternative") {
    MeasuredChoice m;
    trials(m, {1, 1, 1, 1});
    m.decide({0.0100, 0.0085});
    CHECK_FALSE(m.vote_due());
    CHECK(m.chosen() == MeasuredChoice::kAlternative);
    CHECK(m.next() == MeasuredChoice::kAlternative);
  }
  SECTION("0.95 of it: the table's") {
    MeasuredChoice m;
    trials(m, {1, 1, 1, 1});
    m.decide({0.0100, 0.0095});
    CHECK(m.chosen() == MeasuredChoice::kTable);
    CHECK(m.next() == MeasuredChoice::kTable);
  }
  SECTION("exactly 0.9 of it: the table's") {
    MeasuredChoice m;
    trials(m, {1, 1, 1, 1});
    m.decide({0.5, 0.45});
    CHECK(m.chosen() == MeasuredChoice::kTable);
  }
  SECTION("slower: the table's") {
    MeasuredChoice m;
    trials(m, {1, 1, 1, 1});
    m.decide({0.010, 0.020});
    CHECK(m.chosen() == MeasuredChoice::kTable);
  }
}

TEST_CASE("measured choice: the winner runs 256 calls, then the trials start again", "[unit]") {
  MeasuredChoice m;
  // The first round's times are the faster ones, so a second round that kept them would vote
  // them again.
  trials(m, {0.002, 0.001, 0.002, 0.001});
  m.decide({0.002, 0.001});
  for (int i = 0; i < 256; ++i) {
    REQUIRE_FALSE(m.vote_due());
    REQUIRE(m.next() == MeasuredChoice::kAlternative);
    m.record(0.001);
  }
  // A new round: the table's first, the previous winner stays chosen until the next vote.
  CHECK(m.next() == MeasuredChoice::kTable);
  CHECK(m.chosen() == MeasuredChoice::kAlternative);
  trials(m, {0.004, 0.006, 0.005, 0.007});
  CHECK(m.vote_due());
  CHECK(m.vote() == std::array<double, 2>{0.004, 0.006});
  m.decide({0.004, 0.006});
  CHECK(m.chosen() == MeasuredChoice::kTable);
  CHECK(m.next() == MeasuredChoice::kTable);
}
