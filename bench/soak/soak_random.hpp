#pragma once

// The soak's one source of randomness. Every rank must draw exactly the same plan from the same
// seed, and a seed printed by one build must replay on another, so the draws are made here from
// splitmix64 rather than through <random>'s distributions (whose algorithms the standard leaves
// to each library).

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <utility>
#include <vector>

namespace cohort::soak {

/// splitmix64's finaliser: every input bit affects every output bit.
constexpr std::uint64_t mix64(std::uint64_t x) noexcept {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/// A hash of several words, for data that must be a pure function of its coordinates
/// (seed, op index, rank, element): each word is folded in through mix64.
constexpr std::uint64_t hash_words(std::initializer_list<std::uint64_t> words) noexcept {
  std::uint64_t h = 0x6a09e667f3bcc909ull;
  for (std::uint64_t w : words) h = mix64(h ^ w);
  return h;
}

class SoakRandom {
 public:
  explicit SoakRandom(std::uint64_t seed) noexcept : state_(seed) {}

  std::uint64_t next() noexcept {
    state_ += 0x9e3779b97f4a7c15ull;
    return mix64(state_);
  }
  /// Uniform in [0, n) for n > 0 (modulo bias is below 2^-40 for the n the soak uses).
  std::uint64_t below(std::uint64_t n) noexcept { return next() % n; }
  /// Uniform in [lo, hi].
  std::size_t between(std::size_t lo, std::size_t hi) noexcept { return lo + below(hi - lo + 1); }
  /// True with probability numerator / denominator.
  bool chance(std::uint64_t numerator, std::uint64_t denominator) noexcept {
    return below(denominator) < numerator;
  }
  template <class T>
  const T& pick(std::span<const T> items) noexcept {
    return items[below(items.size())];
  }
  /// Index i with probability weights[i] / sum(weights).
  std::size_t weighted(std::span<const unsigned> weights) noexcept {
    std::uint64_t total = 0;
    for (unsigned w : weights) total += w;
    std::uint64_t x = below(total);
    for (std::size_t i = 0; i < weights.size(); ++i) {
      if (x < weights[i]) return i;
      x -= weights[i];
    }
    return weights.size() - 1;
  }
  /// A uniformly shuffled 0 .. n-1 (Fisher-Yates).
  std::vector<std::size_t> permutation(std::size_t n) noexcept {
    std::vector<std::size_t> order(n);
    for (std::size_t i = 0; i < n; ++i) order[i] = i;
    for (std::size_t i = n; i > 1; --i) std::swap(order[i - 1], order[below(i)]);
    return order;
  }

 private:
  std::uint64_t state_;
};

}  // namespace cohort::soak
