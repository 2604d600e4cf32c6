#pragma once

// Dissemination (Hensgen, Finkel, Manber): ceil(log2 size) rounds; in round k rank r signals
// r + 2^k and waits for r - 2^k. After round k every rank has heard, directly or transitively,
// from the 2^(k+1) - 1 ranks before it, so after the last round from everyone. Works for any size.

#include "patterns/binomial_tree.hpp"
#include "patterns/ring.hpp"

namespace cohort::patterns {

struct DisseminationRound {
  int send_to;
  int recv_from;
};

constexpr int dissemination_rounds(int size) noexcept {
  return ceil_log2(size);
}

constexpr DisseminationRound dissemination_round(int rank, int size, int round) noexcept {
  const int d = 1 << round;
  return {wrap(rank + d, size), wrap(rank - d, size)};
}

}  // namespace cohort::patterns
