#pragma once

// The root's own block of a gather or scatter: the one block that never crosses a transport,
// copied between the root's input and output unless the in-place form already put it there.
// Each algorithm copies it where it overlaps with something else: the trees while messages are in
// flight, the shared-memory algorithms a share per round, while the other ranks copy theirs.

#include "algorithms/args.hpp"
#include "core/copy_bytes.hpp"

#include <cstddef>

namespace cohort::algorithms {

/// Where the root's own block is, where it goes, and how much of it has been copied. Root only;
/// single-threaded, like the op that owns it. Validation refused partly overlapping buffers, so
/// source and destination are either the same bytes (nothing to copy) or disjoint.
class OwnBlock {
 public:
  /// Gather: the root's input goes to displs[root] of its output.
  static OwnBlock of(const GatherArgs& args) noexcept {
    const auto root = static_cast<std::size_t>(args.root);
    return {static_cast<const std::byte*>(args.in),
            static_cast<std::byte*>(args.out) + args.displs[root] * dtype_size(args.dtype),
            args.counts[root] * dtype_size(args.dtype)};
  }

  /// Scatter: displs[root] of the root's input goes to its output.
  static OwnBlock of(const ScatterArgs& args) noexcept {
    const auto root = static_cast<std::size_t>(args.root);
    return {static_cast<const std::byte*>(args.in) + args.displs[root] * dtype_size(args.dtype),
            static_cast<std::byte*>(args.out), args.counts[root] * dtype_size(args.dtype)};
  }

  /// Nothing to copy (a rank that is not the root).
  OwnBlock() noexcept = default;

  /// Bytes to copy: zero when in place or empty.
  std::size_t bytes() const noexcept { return bytes_; }

  /// Whether the call is in place: the block's source and destination are the same bytes (the
  /// measured choice keeps such calls apart, algorithms/measured_choice.hpp).
  bool in_place() const noexcept { return from_ != nullptr && from_ == to_; }

  /// Copies what remains.
  void copy_rest() noexcept {
    copy_bytes(to_ + done_, from_ + done_, bytes_ - done_);
    done_ = bytes_;
  }

  /// Copies up to share `c + 1` of `shares` equal shares (0 <= c < shares): spread over the
  /// rounds of an algorithm, the block is whole after the last one.
  void copy_through_share(std::size_t c, std::size_t shares) noexcept {
    const std::size_t until = bytes_ * (c + 1) / shares;
    copy_bytes(to_ + done_, from_ + done_, until - done_);
    done_ = until;
  }

 private:
  OwnBlock(const std::byte* from, std::byte* to, std::size_t bytes) noexcept
      : from_(from), to_(to), bytes_(from == to ? 0 : bytes) {}

  const std::byte* from_ = nullptr;
  std::byte* to_ = nullptr;
  std::size_t bytes_ = 0;
  std::size_t done_ = 0;
};

}  // namespace cohort::algorithms
