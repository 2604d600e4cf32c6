#pragma once

// Ring topology: rank r sends to r + 1 and receives from r - 1 (mod size). Ring algorithms
// work on positions 0..size-1 that may be a rotation of the ranks (broadcast's ring runs over
// ranks relative to the root), so the helpers take and return plain indices.

namespace cohort::patterns {

/// (a mod n) for any int a, with n > 0; the result is in [0, n).
constexpr int wrap(int a, int n) noexcept {
  const int m = a % n;
  return m < 0 ? m + n : m;
}

struct RingNeighbours {
  int left;   ///< receives come from here: position - 1
  int right;  ///< sends go here: position + 1
};

/// Neighbours of `position` in a ring of `size` (>= 1). With size 1 both are the position itself
/// (ring algorithms do no steps then); with size 2 left == right.
constexpr RingNeighbours ring_neighbours(int position, int size) noexcept {
  return {wrap(position - 1, size), wrap(position + 1, size)};
}

/// Rank at distance `position` from `root` (relative position -> absolute rank).
constexpr int absolute_rank(int relative, int root, int size) noexcept {
  return wrap(relative + root, size);
}

/// Position of `rank` relative to `root` (absolute rank -> relative position, root is 0).
constexpr int relative_rank(int rank, int root, int size) noexcept {
  return wrap(rank - root, size);
}

}  // namespace cohort::patterns
