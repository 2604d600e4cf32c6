// MeasuredChoice's schedule and decision, with times given by hand: which algorithm each call
// runs, when the ranks must vote, what they decide, and when the measurement starts again.

#include "algorithms/measured_choice.hpp"
#include "algorithms/selection.hpp"
#include "core/tunables.hpp"
#include "support/scoped_env.hpp"

#include <catch2/catch.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
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
  CHECK(m.vote() == std::array<double, 3>{0.010, 0.009, 1.0});
}

TEST_CASE("measured choice: the alternative wins only below 0.9 of the table's time", "[unit]") {
  SECTION("0.85 of it: the alternative") {
    MeasuredChoice m;
    trials(m, {1, 1, 1, 1});
    m.decide({0.0100, 0.0085, 1.0});
    CHECK_FALSE(m.vote_due());
    CHECK(m.chosen() == MeasuredChoice::kAlternative);
    CHECK(m.next() == MeasuredChoice::kAlternative);
  }
  SECTION("0.95 of it: the table's") {
    MeasuredChoice m;
    trials(m, {1, 1, 1, 1});
    m.decide({0.0100, 0.0095, 1.0});
    CHECK(m.chosen() == MeasuredChoice::kTable);
    CHECK(m.next() == MeasuredChoice::kTable);
  }
  SECTION("exactly 0.9 of it: the table's") {
    MeasuredChoice m;
    trials(m, {1, 1, 1, 1});
    m.decide({0.5, 0.45, 1.0});
    CHECK(m.chosen() == MeasuredChoice::kTable);
  }
  SECTION("slower: the table's") {
    MeasuredChoice m;
    trials(m, {1, 1, 1, 1});
    m.decide({0.010, 0.020, 1.0});
    CHECK(m.chosen() == MeasuredChoice::kTable);
  }
}

TEST_CASE("measured choice: the winner runs 256 calls, then the trials start again", "[unit]") {
  MeasuredChoice m;
  // The first round's times are the faster ones, so a second round that kept them would vote
  // them again.
  trials(m, {0.002, 0.001, 0.002, 0.001});
  m.decide({0.002, 0.001, 1.0});
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
  CHECK(m.vote() == std::array<double, 3>{0.004, 0.006, 1.0});
  m.decide({0.004, 0.006, 1.0});
  CHECK(m.chosen() == MeasuredChoice::kTable);
  CHECK(m.next() == MeasuredChoice::kTable);
}

TEST_CASE("measured choice: a small class tries each algorithm 8 times and measures rarely",
          "[unit]") {
  constexpr std::size_t kKiB = 1024;
  SECTION("16 KiB: 16 trial calls, then 65536 calls (4 GiB would be 262144)") {
    MeasuredChoice m(16 * kKiB);
    CHECK(m.trial_calls() == 16);
    CHECK(m.calls_between_trials() == 65536);
    std::vector<Which> order;
    // Best of 8 each: one fast table call among slow ones still counts. Every call had
    // mappable buffers.
    for (int i = 0; i < 16; ++i) {
      REQUIRE_FALSE(m.vote_due());
      order.push_back(m.next());
      m.record(i == 6 ? 0.001 : i % 2 == 0 ? 0.009 : 0.003, true);
    }
    CHECK(order[14] == MeasuredChoice::kTable);
    CHECK(order[15] == MeasuredChoice::kAlternative);
    CHECK(m.vote_due());
    CHECK(m.vote() == std::array<double, 3>{0.001, 0.003, 0.0});
    m.decide({0.009, 0.003, 0.0});
    CHECK(m.chosen() == MeasuredChoice::kAlternative);
    for (int i = 0; i < 65535; ++i) m.record(0.003);
    CHECK(m.next() == MeasuredChoice::kAlternative);
    m.record(0.003);
    CHECK(m.next() == MeasuredChoice::kTable);  // measuring again
  }
  SECTION("the alternative only where no rank had ordinary buffers in a trial") {
    MeasuredChoice m(64 * kKiB);
    for (int i = 0; i < 16; ++i) m.record(i % 2 == 0 ? 0.009 : 0.003, i != 9);
    CHECK(m.vote() == std::array<double, 3>{0.009, 0.003, 1.0});
    m.decide({0.009, 0.003, 1.0});  // a third as long, but some rank's memory was ordinary
    CHECK(m.chosen() == MeasuredChoice::kTable);
    // The next round starts clean: all mappable this time.
    for (std::uint32_t i = 0; i < m.calls_between_trials(); ++i) m.record(0.009);
    for (int i = 0; i < 16; ++i) m.record(i % 2 == 0 ? 0.009 : 0.003, true);
    CHECK(m.vote()[2] == 0.0);
    m.decide({0.009, 0.003, 0.0});
    CHECK(m.chosen() == MeasuredChoice::kAlternative);
  }
  SECTION("a reduction's small class decides by time alone from 2 MiB, not at 1 MiB") {
    static_assert(MeasuredChoice::kAnyMemoryClassBytes == 2048 * kKiB,
                  "the classes below are written for 2 MiB");
    MeasuredChoice two(2048 * kKiB);
    MeasuredChoice one(1024 * kKiB);
    CHECK(two.trial_calls() == 16);
    for (MeasuredChoice* m : {&two, &one}) {
      for (int i = 0; i < 16; ++i) m->record(i % 2 == 0 ? 0.009 : 0.003, false);
      m->decide({0.009, 0.003, 1.0});  // some rank's memory ordinary
    }
    CHECK(two.chosen() == MeasuredChoice::kAlternative);
    CHECK(one.chosen() == MeasuredChoice::kTable);
  }
  SECTION("a broadcast's small class decides by time alone, with a small class's trials") {
    MeasuredChoice m(1024 * kKiB, MeasuredChoice::SmallClass::AnyMemory);
    CHECK(m.trial_calls() == 16);
    CHECK(m.calls_between_trials() == 4096);
    for (int i = 0; i < 16; ++i) m.record(i % 2 == 0 ? 0.009 : 0.003, false);
    CHECK(m.vote() == std::array<double, 3>{0.009, 0.003, 1.0});
    m.decide({0.009, 0.003, 1.0});  // every rank's memory ordinary
    CHECK(m.chosen() == MeasuredChoice::kAlternative);
  }
  SECTION("a large class decides by time alone") {
    MeasuredChoice m(16 * 1024 * kKiB);
    trials(m, {0.009, 0.003, 0.009, 0.003});
    m.decide({0.009, 0.003, 1.0});
    CHECK(m.chosen() == MeasuredChoice::kAlternative);
  }
  SECTION("4 MiB: 1024 calls between trials (4 GiB of them)") {
    const MeasuredChoice m(4 * 1024 * kKiB);
    CHECK(m.trial_calls() == 16);
    CHECK(m.calls_between_trials() == 1024);
  }
  SECTION("8 MiB: 512; 16 MiB and up: 4 trial calls and 256 between, as before") {
    CHECK(MeasuredChoice(8 * 1024 * kKiB).calls_between_trials() == 512);
    const MeasuredChoice large(16 * 1024 * kKiB);
    CHECK(large.trial_calls() == 4);
    CHECK(large.calls_between_trials() == 256);
  }
}

TEST_CASE(
    "measured choice: which allreduces, reduces, reduce_scatters, broadcasts, scatters, gathers "
    "and alltoalls a communicator measures, and "
    "in which size class",
    "[unit]") {
  using cohort::Algorithm;
  using cohort::algorithms::kMeasuredChoiceMinBytes;
  using cohort::algorithms::SelectionMemo;
  constexpr std::size_t kKiB = std::size_t{1} << 10;
  constexpr std::size_t kMiB = std::size_t{1} << 20;
  static_assert(kMeasuredChoiceMinBytes == 16 * kKiB, "the classes below are written for 16 KiB");
  const cohort::test::ScopedEnv algo("COHORT_ALGO", std::nullopt);
  cohort::reload_tunables();
  SelectionMemo memo;
  const auto allreduce = [&](std::size_t bytes, Algorithm forced) {
    return memo.measured(cohort::Collective::Allreduce, bytes, 2, forced);
  };

  SECTION("from 16 KiB, one class per doubling, the last taking everything larger") {
    CHECK(allreduce(16 * kKiB - 1, Algorithm::Auto) == nullptr);
    MeasuredChoice* first = allreduce(16 * kKiB, Algorithm::Auto);
    REQUIRE(first != nullptr);
    CHECK(first->trial_calls() == 16);
    CHECK(allreduce(32 * kKiB - 1, Algorithm::Auto) == first);
    MeasuredChoice* second = allreduce(32 * kKiB, Algorithm::Auto);
    CHECK(second != nullptr);
    CHECK(second != first);
    // Each class measures with its own size's trials.
    CHECK(allreduce(16 * kMiB, Algorithm::Auto)->trial_calls() == 4);
    CHECK(allreduce(16 * kMiB - 1, Algorithm::Auto)->calls_between_trials() == 512);
    // Classes 16 KiB * 2^k for k = 0 .. 25: the last starts at 2^39 bytes.
    MeasuredChoice* last = allreduce(std::size_t{1} << 39, Algorithm::Auto);
    CHECK(last != allreduce((std::size_t{1} << 39) - 1, Algorithm::Auto));
    CHECK(allreduce(std::size_t{1} << 50, Algorithm::Auto) == last);
  }
  SECTION("reduce and reduce_scatter have classes of their own; no other collective is measured") {
    using cohort::Collective;
    MeasuredChoice* scatter =
        memo.measured(Collective::ReduceScatter, 16 * kKiB, 2, Algorithm::Auto);
    REQUIRE(scatter != nullptr);
    CHECK(scatter != allreduce(16 * kKiB, Algorithm::Auto));
    CHECK(scatter->trial_calls() == 16);
    CHECK(memo.measured(Collective::ReduceScatter, 16 * kKiB - 1, 2, Algorithm::Auto) == nullptr);
    CHECK(memo.measured(Collective::ReduceScatter, 64 * kMiB, 2, Algorithm::SharedMemory) ==
          nullptr);
    CHECK(memo.measured(Collective::ReduceScatter, 64 * kMiB, 2, Algorithm::Auto)->trial_calls() ==
          4);
    MeasuredChoice* reduce = memo.measured(Collective::Reduce, 16 * kKiB, 2, Algorithm::Auto);
    REQUIRE(reduce != nullptr);
    CHECK(reduce != scatter);
    CHECK(reduce != allreduce(16 * kKiB, Algorithm::Auto));
    for (Collective other : {Collective::Allgather, Collective::Barrier})
      for (int world : {2, 3, 4})
        CHECK(memo.measured(other, 64 * kMiB, world, Algorithm::Auto) == nullptr);
  }
  SECTION("every reduction's classes below 2 MiB keep single copy for mappable memory only") {
    using cohort::Collective;
    for (Collective c : {Collective::Allreduce, Collective::Reduce, Collective::ReduceScatter}) {
      CAPTURE(c);
      MeasuredChoice* below = memo.measured(c, 2 * kMiB - 1, 3, Algorithm::Auto);
      MeasuredChoice* from = memo.measured(c, 2 * kMiB, 3, Algorithm::Auto);
      MeasuredChoice* eight = memo.measured(c, 8 * kMiB, 3, Algorithm::Auto);
      REQUIRE(below != nullptr);
      REQUIRE(from != nullptr);
      REQUIRE(eight != nullptr);
      for (MeasuredChoice* m : {below, from, eight}) {
        for (int i = 0; i < m->trial_calls(); ++i) m->record(i % 2 == 0 ? 0.009 : 0.003, false);
        m->decide({0.009, 0.003, 1.0});  // a third of the time, over ordinary memory
      }
      CHECK(below->chosen() == MeasuredChoice::kTable);
      CHECK(from->chosen() == MeasuredChoice::kAlternative);
      CHECK(eight->chosen() == MeasuredChoice::kAlternative);
    }
  }
  SECTION("broadcast: from 1 MiB on 2 ranks or more, in classes of its own for each form") {
    using cohort::Collective;
    using cohort::algorithms::CallForm;
    using cohort::algorithms::kBroadcastMeasuredMinBytes;
    static_assert(kBroadcastMeasuredMinBytes == kMiB, "the sizes below are written for 1 MiB");
    CHECK(memo.measured(Collective::Broadcast, kMiB - 1, 2, Algorithm::Auto) == nullptr);
    CHECK(memo.measured(Collective::Broadcast, kMiB - 1, 3, Algorithm::Auto, CallForm::InPlace) ==
          nullptr);
    CHECK(memo.measured(Collective::Broadcast, kMiB, 3, Algorithm::Tree) == nullptr);
    CHECK(memo.measured(Collective::Broadcast, kMiB, 2, Algorithm::Tree, CallForm::InPlace) ==
          nullptr);
    MeasuredChoice* broadcast = memo.measured(Collective::Broadcast, kMiB, 2, Algorithm::Auto);
    REQUIRE(broadcast != nullptr);
    CHECK(broadcast == memo.measured(Collective::Broadcast, 2 * kMiB - 1, 5, Algorithm::Auto));
    CHECK(broadcast != memo.measured(Collective::Broadcast, 2 * kMiB, 3, Algorithm::Auto));
    CHECK(broadcast != allreduce(kMiB, Algorithm::Auto));
    // In place at the root: a class of its own, in the same size classes.
    MeasuredChoice* in_place =
        memo.measured(Collective::Broadcast, kMiB, 2, Algorithm::Auto, CallForm::InPlace);
    REQUIRE(in_place != nullptr);
    CHECK(in_place != broadcast);
    CHECK(in_place == memo.measured(Collective::Broadcast, 2 * kMiB - 1, 4, Algorithm::Auto,
                                    CallForm::InPlace));
    CHECK(in_place !=
          memo.measured(Collective::Broadcast, 2 * kMiB, 2, Algorithm::Auto, CallForm::InPlace));
    CHECK(broadcast->trial_calls() == 16);
    // Ordinary memory may win it: a third of the time, though every rank's buffers were
    // ordinary, chooses single copy (an allreduce's class of the same size would not); the
    // in-place class, measured the other way round, keeps the table's.
    for (int i = 0; i < 16; ++i) {
      broadcast->record(i % 2 == 0 ? 0.009 : 0.003, false);
      in_place->record(i % 2 == 0 ? 0.003 : 0.009, false);
    }
    broadcast->decide({0.009, 0.003, 1.0});
    in_place->decide({0.003, 0.009, 1.0});
    CHECK(broadcast->chosen() == MeasuredChoice::kAlternative);
    CHECK(in_place->chosen() == MeasuredChoice::kTable);
    // The allreduce's classes count per world size too: 2 ranks or 5, the same class; the form
    // does not split them.
    CHECK(memo.measured(Collective::Allreduce, kMiB, 5, Algorithm::Auto) ==
          allreduce(kMiB, Algorithm::Auto));
    CHECK(memo.measured(Collective::Allreduce, kMiB, 2, Algorithm::Auto, CallForm::InPlace) ==
          allreduce(kMiB, Algorithm::Auto));
  }
  SECTION(
      "gather from 2 MiB on 2 ranks or more, scatter from 256 KiB on 3 or more (a class per "
      "form each), uniform alltoall from 256 KiB on 3 ranks or more") {
    using cohort::Collective;
    using cohort::algorithms::CallForm;
    using cohort::algorithms::kUnknownBytes;
    CHECK(memo.measured(Collective::Alltoall, 256 * kKiB, 2, Algorithm::Auto) == nullptr);
    CHECK(memo.measured(Collective::Scatter, 256 * kKiB, 2, Algorithm::Auto) == nullptr);
    CHECK(memo.measured(Collective::Scatter, 64 * kMiB, 2, Algorithm::Auto, CallForm::InPlace) ==
          nullptr);
    CHECK(memo.measured(Collective::Scatter, 256 * kKiB, 3, Algorithm::Auto, CallForm::InPlace) !=
          memo.measured(Collective::Scatter, 256 * kKiB, 3, Algorithm::Auto));
    // Gather likewise, in classes of its own, from 2 MiB.
    CHECK(memo.measured(Collective::Gather, 2 * kMiB - 1, 2, Algorithm::Auto) == nullptr);
    CHECK(memo.measured(Collective::Gather, 2 * kMiB, 2, Algorithm::Tree) == nullptr);
    MeasuredChoice* gather = memo.measured(Collective::Gather, 2 * kMiB, 2, Algorithm::Auto);
    REQUIRE(gather != nullptr);
    CHECK(gather == memo.measured(Collective::Gather, 4 * kMiB - 1, 5, Algorithm::Auto));
    CHECK(gather !=
          memo.measured(Collective::Gather, 2 * kMiB, 2, Algorithm::Auto, CallForm::InPlace));
    CHECK(gather != memo.measured(Collective::Scatter, 2 * kMiB, 3, Algorithm::Auto));
    CHECK(memo.measured(Collective::Gather, 2 * kMiB, 3, Algorithm::Auto, CallForm::InPlace) !=
          memo.measured(Collective::Scatter, 2 * kMiB, 3, Algorithm::Auto, CallForm::InPlace));
    // An alltoall's form is every rank's own: one class.
    CHECK(memo.measured(Collective::Alltoall, 256 * kKiB, 3, Algorithm::Auto, CallForm::InPlace) ==
          memo.measured(Collective::Alltoall, 256 * kKiB, 3, Algorithm::Auto));
    for (Collective c : {Collective::Scatter, Collective::Alltoall}) {
      CAPTURE(c);
      CHECK(memo.measured(c, 256 * kKiB - 1, 3, Algorithm::Auto) == nullptr);
      CHECK(memo.measured(c, 256 * kKiB, 3, Algorithm::SingleCopy) == nullptr);
      MeasuredChoice* m = memo.measured(c, 256 * kKiB, 3, Algorithm::Auto);
      REQUIRE(m != nullptr);
      CHECK(m == memo.measured(c, 512 * kKiB - 1, 4, Algorithm::Auto));
      CHECK(memo.measured(c, kMiB, 3, Algorithm::Auto) !=
            memo.measured(Collective::Broadcast, kMiB, 3, Algorithm::Auto));
      CHECK(m != allreduce(256 * kKiB, Algorithm::Auto));
      // Decides by time alone over ordinary memory, as the broadcast's.
      for (int i = 0; i < 16; ++i) m->record(i % 2 == 0 ? 0.009 : 0.003, false);
      m->decide({0.009, 0.003, 1.0});
      CHECK(m->chosen() == MeasuredChoice::kAlternative);
    }
    CHECK(memo.measured(Collective::Scatter, 64 * kMiB, 3, Algorithm::Auto) !=
          memo.measured(Collective::Alltoall, 64 * kMiB, 3, Algorithm::Auto));
    // An alltoallv (sizes that differ per rank) is never measured.
    CHECK(memo.measured(Collective::Alltoall, kUnknownBytes, 3, Algorithm::Auto) == nullptr);
  }
  SECTION("not with a forced algorithm") {
    CHECK(allreduce(64 * kMiB, Algorithm::SharedMemory) == nullptr);
    CHECK(allreduce(64 * kMiB, Algorithm::Ring) == nullptr);
  }
  SECTION("not with a COHORT_ALGO override for allreduce; another family's does not matter") {
    {
      const cohort::test::ScopedEnv ring("COHORT_ALGO", "allreduce:ring");
      cohort::reload_tunables();
      CHECK(allreduce(64 * kMiB, Algorithm::Auto) == nullptr);
    }
    const cohort::test::ScopedEnv tree("COHORT_ALGO", "broadcast:tree,reduce_scatter:ring");
    cohort::reload_tunables();
    CHECK(allreduce(64 * kMiB, Algorithm::Auto) != nullptr);
    CHECK(memo.measured(cohort::Collective::Broadcast, 64 * kMiB, 3, Algorithm::Auto) == nullptr);
    CHECK(memo.measured(cohort::Collective::ReduceScatter, 64 * kMiB, 2, Algorithm::Auto) ==
          nullptr);
  }
  cohort::reload_tunables();
}
