#pragma once

// Round arithmetic shared by the shared-memory algorithms that move blocks through the arena in
// fixed-size pieces (alltoall, gather, scatter): every rank must count the same rounds, and each
// round moves one piece of every block that is still long enough.

#include <algorithm>
#include <cstddef>
#include <span>

namespace cohort::algorithms {

/// Bytes of a block of `total` bytes that round `round` moves, in pieces of `piece` bytes.
constexpr std::size_t round_bytes(std::size_t total, std::size_t round, std::size_t piece) {
  const std::size_t at = round * piece;
  return at < total ? std::min(piece, total - at) : 0;
}

/// Rounds of `piece` bytes needed for the largest of `counts` (elements of `element_size`
/// bytes), leaving out index `skip` (the block a rank keeps or copies locally).
inline std::size_t rounds_for_others(std::span<const std::size_t> counts, std::size_t element_size,
                                     std::size_t skip, std::size_t piece) {
  std::size_t largest = 0;
  for (std::size_t r = 0; r < counts.size(); ++r)
    if (r != skip) largest = std::max(largest, counts[r] * element_size);
  return (largest + piece - 1) / piece;
}

/// Bytes of the blocks of `counts` before index `until` (elements of `element_size` bytes),
/// leaving out index `skip`: where a block sits when the others are packed one after another
/// (a scatter's eager line), or, with `until` = counts.size(), all of them together.
inline std::size_t packed_before(std::span<const std::size_t> counts, std::size_t element_size,
                                 std::size_t skip, std::size_t until) {
  std::size_t bytes = 0;
  for (std::size_t r = 0; r < until; ++r)
    if (r != skip) bytes += counts[r] * element_size;
  return bytes;
}

}  // namespace cohort::algorithms
