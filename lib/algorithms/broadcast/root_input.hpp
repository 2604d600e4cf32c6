#pragma once

// The out-of-place root of a broadcast: its input must also end up in its own output. Each
// broadcast algorithm makes that copy where it costs least, rather than all of them waiting for
// it before the first byte moves: the tree after posting its sends, the shared-memory broadcast
// piece by piece while the other ranks copy the piece out of the arena. An algorithm with
// nothing to overlap it with copies first (copy_root_input).

#include "algorithms/args.hpp"
#include "core/copy_bytes.hpp"

#include <cstddef>

namespace cohort::algorithms {

/// The root's data: its input (its output when in place).
inline const std::byte* root_data(const BroadcastArgs& args) noexcept {
  return static_cast<const std::byte*>(args.in);
}

/// Copies bytes [offset, offset + length) of the root's input into its output, unless the op is
/// in place. Root only. Validation refused partly overlapping buffers.
inline void copy_root_piece(const BroadcastArgs& args, std::size_t offset,
                            std::size_t length) noexcept {
  if (args.in == args.out || length == 0) return;
  copy_bytes(static_cast<std::byte*>(args.out) + offset, root_data(args) + offset, length);
}

/// The whole vector (root only).
inline void copy_root_input(const BroadcastArgs& args) noexcept {
  copy_root_piece(args, 0, args.count * dtype_size(args.dtype));
}

}  // namespace cohort::algorithms
