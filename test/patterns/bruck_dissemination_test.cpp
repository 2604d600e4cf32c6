// Bruck and dissemination rounds: sends and receives pair up between ranks, and the rounds
// spread information from every rank to every rank.

#include "patterns/bruck.hpp"
#include "patterns/dissemination.hpp"

#include <catch2/catch.hpp>

#include <vector>

using namespace cohort::patterns;

TEST_CASE("bruck rounds pair up and the allgather moves size - 1 blocks", "[patterns]") {
  for (int size = 1; size <= 64; ++size) {
    REQUIRE(bruck_rounds(size) == ceil_log2(size));
    int blocks = 0;
    for (int round = 0; round < bruck_rounds(size); ++round) {
      const int d = 1 << round;
      blocks += bruck_allgather_blocks(size, d);
      for (int rank = 0; rank < size; ++rank) {
        const auto r = bruck_round(rank, size, round);
        REQUIRE(r.distance == d);
        REQUIRE(bruck_round(r.send_to, size, round).recv_from == rank);
        REQUIRE(bruck_round(r.recv_from, size, round).send_to == rank);
      }
    }
    REQUIRE(blocks == size - 1);
  }
}

TEST_CASE("dissemination rounds reach every rank from every rank", "[patterns]") {
  for (int size = 1; size <= 64; ++size) {
    // known[r][s]: rank r has (transitively) heard from rank s.
    std::vector<std::vector<bool>> known(size, std::vector<bool>(size, false));
    for (int r = 0; r < size; ++r) known[r][r] = true;
    for (int round = 0; round < dissemination_rounds(size); ++round) {
      auto next = known;
      for (int rank = 0; rank < size; ++rank) {
        const auto r = dissemination_round(rank, size, round);
        REQUIRE(r.send_to != rank);
        REQUIRE(dissemination_round(r.send_to, size, round).recv_from == rank);
        for (int s = 0; s < size; ++s)
          if (known[r.recv_from][s]) next[rank][s] = true;
      }
      known = next;
    }
    for (int r = 0; r < size; ++r)
      for (int s = 0; s < size; ++s) REQUIRE(known[r][s]);
  }
}
