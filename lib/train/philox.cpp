// Philox4x32-10 (Salmon, Moraes, Dror, Shaw: "Parallel random numbers: as easy as 1, 2, 3",
// SC'11), the generator Random123, cuRAND and torch's CUDA generator use.
//
// How it works: the 128-bit counter is four 32-bit words; each of the 10 rounds multiplies two of
// them by fixed odd constants, keeps both halves of each 64-bit product, and mixes the high halves
// with the other two words and the key. Between rounds the 64-bit key is bumped by Weyl constants
// (the golden ratio and sqrt(3) - 1, in 32-bit fixed point). Every step is invertible, so for a
// fixed key the map is a bijection of the counter: distinct counters never give equal outputs.
//
// Cost: 20 32x32->64 multiplies and a few xors per 128 output bits; no state, no tables.

#include <cohort/train/random.hpp>

#include <cstdint>

namespace cohort::train {
namespace {

// Round multipliers and key increments, exactly as in the paper and Random123's philox.h.
constexpr std::uint32_t kMultiplier0 = 0xD2511F53;
constexpr std::uint32_t kMultiplier1 = 0xCD9E8D57;
constexpr std::uint32_t kWeyl0 = 0x9E3779B9;
constexpr std::uint32_t kWeyl1 = 0xBB67AE85;
constexpr int kRounds = 10;

struct Product {
  std::uint32_t hi;
  std::uint32_t lo;
};

constexpr Product multiply(std::uint32_t a, std::uint32_t b) noexcept {
  const std::uint64_t p = std::uint64_t{a} * std::uint64_t{b};
  return {static_cast<std::uint32_t>(p >> 32), static_cast<std::uint32_t>(p)};
}

// One Philox S-box round: the products of words 0 and 2 are spread over all four outputs, the
// high halves folded with the untouched words 1 and 3 and the round key.
constexpr std::array<std::uint32_t, 4> round(const std::array<std::uint32_t, 4>& c,
                                             const std::array<std::uint32_t, 2>& k) noexcept {
  const Product p0 = multiply(kMultiplier0, c[0]);
  const Product p1 = multiply(kMultiplier1, c[2]);
  return {p1.hi ^ c[1] ^ k[0], p1.lo, p0.hi ^ c[3] ^ k[1], p0.lo};
}

}  // namespace

std::array<std::uint32_t, 4> philox4x32_10(std::array<std::uint32_t, 4> counter,
                                           std::array<std::uint32_t, 2> key) noexcept {
  for (int r = 0; r < kRounds; ++r) {
    // The key schedule advances between rounds, not before the first one.
    if (r > 0) {
      key[0] += kWeyl0;
      key[1] += kWeyl1;
    }
    counter = round(counter, key);
  }
  return counter;
}

std::uint64_t derive_seed(std::uint64_t seed, std::uint64_t stream, std::uint64_t index) noexcept {
  const auto low = [](std::uint64_t v) { return static_cast<std::uint32_t>(v); };
  const auto high = [](std::uint64_t v) { return static_cast<std::uint32_t>(v >> 32); };
  // Counter words: index low, index high, stream low, stream high; key: seed low, seed high.
  const std::array<std::uint32_t, 4> out =
      philox4x32_10({low(index), high(index), low(stream), high(stream)}, {low(seed), high(seed)});
  return std::uint64_t{out[0]} | (std::uint64_t{out[1]} << 32);
}

}  // namespace cohort::train
