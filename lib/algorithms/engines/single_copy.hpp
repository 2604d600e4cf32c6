#pragma once

// The handoffs of the single-copy algorithms (<family>/single_copy.cpp): ranks of one host copy
// each other's blocks straight out of the owner's buffer (SharedArena::read_from, which is
// process_vm_readv), one copy per byte instead of the arena's copy in and copy out. A block in
// mappable memory (Buffer::allocate_mappable) is mapped instead (SharedArena::map_peer) and
// copied with plain loads, and an algorithm may work on it in place where every rank's blocks
// are mappable (all_mappable, mapped).
//
// Why: the arena path writes every block into the segment and reads it out again. From a few
// tens of KiB to a few MiB, where blocks still sit in the caches, that second pass is most of an
// op's time (2 ranks, allgather in place of 1 MiB: 77 us through the arena, 32 us in one copy,
// Open MPI's own single copy 31 us; bench/PERFORMANCE-LOG.md, "Single copy").
//
// A one-step op takes two generations of the arena's main numbering:
//   g (exposure): every rank waits until its data slot of g's parity is free, writes a table of
//     (address, bytes, and the file of a block in mappable memory) into it, one entry per
//     destination rank or one for all (none for ranks nobody reads from), and announces Arrived(g).
//     A reader waits for the owner's Arrived(g), finds its entry, checks the length it expects,
//     copies, and then looks at the owner's flag once more: an owner that failed meanwhile (and may
//     have handed its buffer back) has marked it, so the copy is not trusted.
//   g + 1 (release): every rank announces Arrived(g + 1) once it has copied everything it copies.
//     A rank that others read from waits for their Arrived(g + 1) before it returns: after that
//     its caller may change or free the buffers.
// An op of several steps (allreduce: reduce-scatter, then allgather) takes one exposure per
// step, g, g + 1, ..., and the release after them: announcing the next step's table
// (expose_next) also says that this rank read everything of the previous one.
// That keeps the arena's rule (shared_arena.hpp): Arrived(g + 1) comes only after the last read
// of a generation-g table. A rank that fails anywhere in the op marks its flags
// (SharedArena::mark_failed) before the error leaves the op, so its peers fail at once, in this
// op or the next, instead of at their deadlines.

#include "algorithms/op_context.hpp"
#include "transport/shared_arena.hpp"

#include <cstddef>
#include <cstdint>
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
  /// The most ranks whose tables fit one data slot (a header, then one entry per rank).
  static const std::size_t kMaxRanks;

  /// Takes the op's generations: `steps` exposures and a release.
  SingleCopyOp(const OpContext& ctx, transport::SharedArena& arena, int steps = 1);
  /// Marks this rank failed (SharedArena::mark_failed) unless a release returned normally.
  ~SingleCopyOp();
  SingleCopyOp(const SingleCopyOp&) = delete;
  SingleCopyOp& operator=(const SingleCopyOp&) = delete;

  /// (The rules below on who may read and write what until a release are the ones the op's own
  /// generations enforce; an algorithm that orders its accesses by messages of its own, as the
  /// pipelined hierarchical allreduce does, engines/host_pipeline.hpp, keeps its own rules.)
  ///
  /// Publishes this rank's blocks: one per destination rank (entry d for rank d), or one that
  /// every rank reads (entry 0), or none. Call exactly once, before any read. The blocks must
  /// stay valid until the release returns, and every byte a peer reads unchanged until that
  /// peer announces it is done with it (its release, or its next step's table). A block in
  /// mappable memory may also be written by peers in place (mapped()) until their release; if
  /// this rank fails first, a peer stops within the piece it is writing (check_peers).
  void expose(std::span<const ExposedBlock> blocks);
  /// The same for one block per destination rank d: counts[d] elements of `element_bytes` at
  /// `base` + displs[d] elements (a scatter's or an alltoall's layout), written straight into
  /// the table.
  void expose_layout(const void* base, std::span<const std::size_t> counts,
                     std::span<const std::size_t> displs, std::size_t element_bytes);
  /// Moves to the next step: announces this rank's table for it, which tells the peers that it
  /// read all it reads of the previous step's tables (and whatever they point to). Reads then
  /// go to the new step's tables. Every rank must call it at the same point, steps - 1 times
  /// before the release (which checks that).
  void expose_next(std::span<const ExposedBlock> blocks);

  /// Copies entry `entry` of rank r's table into `into`, which holds `bytes`. A length other
  /// than `bytes` is the caller's error (ranks disagreeing about counts): nothing is copied,
  /// and the release throws Error(InvalidArgument) naming both lengths once the peers are done.
  void read(int r, std::size_t entry, void* into, std::size_t bytes);
  /// The same for part of an entry: checks that the entry holds `entry_bytes` (a length
  /// disagreement otherwise, as above), then copies `bytes` from `offset` into it on.
  void read_part(int r, std::size_t entry, std::size_t entry_bytes, std::size_t offset, void* into,
                 std::size_t bytes);

  /// Whether entries [0, entries) of every rank's table (this rank's too) lie in mappable memory
  /// (core/mappable_memory.hpp), or are empty: the same answer on every rank, so ranks may choose
  /// a scheme by it. Waits for every rank's table (returns early only at one with too few
  /// entries).
  bool all_mappable(std::size_t entries);
  /// Whether entry `entry` of rank r's table holds `entry_bytes` (> 0) in mappable memory, so
  /// that mapped() may give it; waits for r's table. Every rank that asks gets the same answer.
  /// A length other than `entry_bytes` is an answer here, not a disagreement.
  bool entry_mappable(int r, std::size_t entry, std::size_t entry_bytes);
  /// Entry `entry` of rank r's table as an address in this process, for reading and writing in
  /// place: rank r's mappable memory mapped here (transport/peer_mappings.hpp), or this rank's
  /// own block. Only where all_mappable() said so. Null for an empty entry, or when the entry's
  /// length is not `entry_bytes` (a disagreement, thrown by the release as for read_part). Rank
  /// r's block may be written only where r reads and writes nothing of it until its release, and
  /// read only where r does not write it.
  std::byte* mapped(int r, std::size_t entry, std::size_t entry_bytes);

  /// Throws as a read would when some peer has failed since it published this step's table (it
  /// marked its flags, and its caller may have its buffers back): an op that writes peers'
  /// memory in place calls it before each piece it writes, so it stops within a piece.
  void check_peers();

  /// Announces that this rank read all it reads, and returns: for a rank nobody reads from.
  void release();
  /// The same, then waits until rank `reader` is done too (gather: the root).
  void release_after(int reader);
  /// The same, then waits until every other rank is done.
  void release_after_all();

 private:
  /// Writes `entries` entries, block_of(d) for entry d, and announces the table.
  template <class BlockOf>
  void write_table(std::size_t entries, BlockOf block_of);
  /// Waits for rank r's table and copies entry `entry` of it into `found` (an Entry); false,
  /// with the disagreement recorded for the release, when its length is not `entry_bytes`.
  bool find_entry(int r, std::size_t entry, std::size_t entry_bytes, void* found);
  /// Throws the first length disagreement, if any, and otherwise marks the op finished.
  void finish();

  const OpContext& ctx_;
  transport::SharedArena& arena_;
  std::uint64_t exposure_;  ///< the current step's generation
  std::uint64_t release_ = 0;
  bool finished_ = false;
  std::string mismatch_;  ///< the first length disagreement, thrown by the release
  int mismatched_rank_ = -1;
};

namespace testing {
/// Allreduces this process ran in place on every rank's mappable buffers
/// (allreduce/single_copy.cpp), for tests that must know the path was taken.
std::uint64_t mapped_allreduces() noexcept;
/// Called by that allreduce before it checks its peers and writes piece `piece` (0, 1, ...),
/// with this rank's number; null (the default) for none. A test's hook may throw (a failure
/// mid-op) or wait (to order one rank's failure before another's writes). Set it before the op.
void set_mapped_piece_hook(void (*hook)(int rank, std::size_t piece)) noexcept;
/// Reduce_scatters this process ran reading every rank's mappable input in place
/// (reduce_scatter/single_copy.cpp).
std::uint64_t mapped_reduce_scatters() noexcept;
/// Reduces this process took part in where every rank folded its share into the root's mapped
/// output (reduce/single_copy.cpp).
std::uint64_t mapped_reduces() noexcept;
}  // namespace testing

/// accepts() of the single-copy algorithms: a shared arena exists, its ranks can read each
/// other's memory (SharedArena::single_copy(), the same on every rank), and their tables fit a
/// slot. A world of one has no peers to copy from; the shared-memory algorithm takes it.
template <class Args>
bool reading_peers(const OpContext& ctx, const Args&) {
  if (ctx.size == 1 || static_cast<std::size_t>(ctx.size) > SingleCopyOp::kMaxRanks) return false;
  const transport::SharedArena* arena = ctx.arena();
  return arena != nullptr && arena->single_copy();
}

}  // namespace cohort::algorithms
