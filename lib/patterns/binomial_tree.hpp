#pragma once

// Binomial tree over relative ranks (rank - root mod size, so the root is 0). Relative rank v's
// parent is v with its lowest set bit cleared; its children are v + 2^k for every 2^k below
// v's lowest set bit (every 2^k < size for the root) with v + 2^k < size. The subtree of v is
// the contiguous range of relative ranks [v, v + subtree_extent(v)), which lets gather and
// scatter move a whole subtree's blocks as one message. Depth is ceil(log2 size).

#include <vector>

namespace cohort::patterns {

/// Lowest power of two >= n (n >= 1).
constexpr int ceil_power_of_two(int n) noexcept {
  int p = 1;
  while (p < n) p <<= 1;
  return p;
}

/// Largest power of two <= n (n >= 1).
constexpr int floor_power_of_two(int n) noexcept {
  int p = 1;
  while (p * 2 <= n) p <<= 1;
  return p;
}

constexpr bool is_power_of_two(int n) noexcept {
  return n > 0 && (n & (n - 1)) == 0;
}

/// Number of rounds of a doubling pattern over `size` ranks: ceil(log2 size), 0 for size 1.
constexpr int ceil_log2(int size) noexcept {
  int rounds = 0;
  while ((1 << rounds) < size) ++rounds;
  return rounds;
}

/// Parent of relative rank v (> 0); -1 for the root.
constexpr int binomial_parent(int v) noexcept {
  return v == 0 ? -1 : v & (v - 1);
}

/// Number of relative ranks in v's subtree (v itself included): the subtree is
/// [v, v + binomial_subtree_extent(v, size)).
constexpr int binomial_subtree_extent(int v, int size) noexcept {
  const int span = v == 0 ? ceil_power_of_two(size) : (v & -v);
  return span < size - v ? span : size - v;
}

/// Children of relative rank v, as relative ranks, smallest subtree first (v + 1, v + 2, v + 4,
/// ...). Reduce and gather drain them in this order (small subtrees finish first); broadcast
/// and scatter feed them in reverse (the deepest subtree starts first).
std::vector<int> binomial_children(int v, int size);

}  // namespace cohort::patterns
