#pragma once

// Bruck's pattern: ceil(log2 size) rounds; in round k (distance d = 2^k) rank r sends to r - d
// and receives from r + d (mod size). Allgather moves min(d, size - d) blocks per round, so the
// total is size - 1 blocks in log rounds for any size. Alltoall sends, in round k, every block
// whose (rotated) index has bit k set.

#include "patterns/binomial_tree.hpp"
#include "patterns/ring.hpp"

namespace cohort::patterns {

struct BruckRound {
  int distance;   ///< 2^round
  int send_to;    ///< rank - distance
  int recv_from;  ///< rank + distance
};

constexpr int bruck_rounds(int size) noexcept {
  return ceil_log2(size);
}

constexpr BruckRound bruck_round(int rank, int size, int round) noexcept {
  const int d = 1 << round;
  return {d, wrap(rank - d, size), wrap(rank + d, size)};
}

/// Blocks the allgather moves in the round with distance d: min(d, size - d).
constexpr int bruck_allgather_blocks(int size, int distance) noexcept {
  return distance < size - distance ? distance : size - distance;
}

}  // namespace cohort::patterns
