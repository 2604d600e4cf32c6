#pragma once

// The handoffs of the single-copy algorithms (<family>/single_copy.cpp): ranks of one host copy
// each other's blocks straight out of the owner's buffer (SharedArena::read_from, which is
// process_vm_readv), one copy per byte instead of the arena's copy in and copy out.
//
// Why: the arena path writes every block into the segment and reads it out again. Between 16 KiB
// and a few MiB, where blocks still sit in the caches, that second pass is most of an op's time
// (2 ranks, allgather in place of 512 KiB: 32 us through the arena, 15 us in one copy, Open MPI's
// own single copy 17 us; README, single copy).
//
// Each op takes two generations of the arena's main numbering:
//   g (exposure): every rank waits until its data slot of g's parity is free, writes a table of
//     (address, bytes) into it, one entry per destination rank or one for all (empty for ranks
//     nobody reads from), and announces Arrived(g). A reader waits for the owner's Arrived(g),
//     finds its entry, checks the length it expects, and copies.
//   g + 1 (release): every rank announces Arrived(g + 1) once it has copied everything it copies.
//     A rank that others read from waits for their Arrived(g + 1) before it returns: after that
//     its caller may change or free the buffers.
// That keeps the arena's rule (shared_arena.hpp): Arrived(g + 1) comes only after the last read
// of a generation-g table, and no slot of another numbering is touched.

#include "algorithms/op_context.hpp"
#include "transport/shared_arena.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

namespace cohort::algorithms {

/// One block a rank lets others copy: where it is in this process, and how long.
struct ExposedBlock {
  const void* data = nullptr;
  std::size_t bytes = 0;
};

/// One op's exposure and release. Single-threaded, like the op that owns it. The arena must
/// have single_copy().
class SingleCopyOp {
 public:
  /// Takes the op's two generations.
  SingleCopyOp(const OpContext& ctx, transport::SharedArena& arena);

  /// Publishes this rank's blocks: one per destination rank (entry d for rank d), or one that
  /// every rank reads (entry 0), or none. Call exactly once, before any read. The blocks must
  /// stay valid and unchanged until release_and_wait().
  void expose(std::span<const ExposedBlock> blocks);

  /// Copies entry `entry` of rank r's table into `into`, which holds `bytes`. A length other
  /// than `bytes` is the caller's error (ranks disagreeing about counts): nothing is copied,
  /// and release*() throws Error(InvalidArgument) naming both lengths once the peers are done.
  void read(int r, std::size_t entry, void* into, std::size_t bytes);

  /// Announces that this rank read all it reads. Then, when `readers` is set, waits until rank
  /// `*readers` is done too, or when it is kEveryone, every rank.
  static constexpr int kEveryone = -1;
  void release(std::optional<int> readers = std::nullopt);

 private:
  const OpContext& ctx_;
  transport::SharedArena& arena_;
  std::uint64_t exposure_;
  std::string mismatch_;  ///< the first length disagreement, thrown by release()
};

}  // namespace cohort::algorithms
