#pragma once

// Balanced block boundaries: `total` elements split into `parts` contiguous blocks whose sizes
// differ by at most one (the first total % parts blocks are one longer). Every algorithm that
// splits a vector between ranks or into pipeline chunks uses these, so both ends of a message
// always agree on its size.

#include <cstddef>

namespace cohort::patterns {

struct BlockRange {
  std::size_t offset;  ///< first element of the block
  std::size_t count;   ///< elements in the block (0 when total < parts and index >= total)
};

/// Block `index` (< parts) of `total` elements split into `parts` (>= 1) balanced blocks.
constexpr BlockRange balanced_block(std::size_t total, std::size_t parts,
                                    std::size_t index) noexcept {
  const std::size_t base = total / parts;
  const std::size_t longer = total % parts;
  const std::size_t offset = index * base + (index < longer ? index : longer);
  return {offset, base + (index < longer ? 1 : 0)};
}

/// Offset of the start of block `index` (index == parts gives total): blocks [a, b) span
/// [balanced_offset(a), balanced_offset(b)).
constexpr std::size_t balanced_offset(std::size_t total, std::size_t parts,
                                      std::size_t index) noexcept {
  const std::size_t base = total / parts;
  const std::size_t longer = total % parts;
  return index * base + (index < longer ? index : longer);
}

/// Number of pieces of at most `max_piece` needed to cover `total` (at least 1, so that even an
/// empty block is one, empty, piece). max_piece must be > 0.
constexpr std::size_t pieces_needed(std::size_t total, std::size_t max_piece) noexcept {
  return total == 0 ? 1 : (total + max_piece - 1) / max_piece;
}

}  // namespace cohort::patterns
