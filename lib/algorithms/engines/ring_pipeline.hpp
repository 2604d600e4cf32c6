#pragma once

// The two ring phases, pipelined in chunks, shared by ring allreduce, ring allgather, ring
// reduce-scatter, scatter-allgather broadcast and reduce-scatter-gather reduce.
//
// A ring runs over positions 0..n-1 (a rotation of the ranks for rooted collectives); the
// vector is split into n blocks by position, and every block into the same number of chunks of
// at most kRingChunkBytes. A phase is a sequence of units (step s, chunk c): at each unit a rank
// sends one chunk to its right neighbour and receives one from its left. Unit u's send depends
// only on unit u - chunks (the same chunk one step earlier), so the receive of unit u + 1 (and,
// with two or more chunks, its send) is posted before unit u's received chunk is reduced: the
// transfer of the next chunk overlaps the reduction of this one.
//
// Reduce-scatter: n - 1 steps, each rank sends and receives (n - 1)/n of the vector and reduces
// as much; afterwards position p holds the full reduction of block p.
// Allgather: n - 1 steps moving (n - 1)/n of the vector; starting with block p at position p,
// afterwards every position holds every block.

#include "algorithms/op_context.hpp"

#include <cohort/dtype.hpp>

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace cohort::algorithms {

/// Largest chunk one pipeline unit moves: big enough that per-message overhead is amortised,
/// small enough that the three operands of a chunk's reduction (input, received, output) stay
/// near L2 while the next chunk is in flight. Measured with ring allreduce of 1-64 MiB f32 on 2
/// and 4 ranks (shared memory, 2-core EPYC VM, 1 MiB L2 per core): 64 KiB ran 2-3x slower than
/// 512 KiB; 512 KiB and 1 MiB were within noise; 4 MiB was 10-20% slower.
inline constexpr std::size_t kRingChunkBytes = 512 * 1024;

struct RingLayout {
  int position;  ///< this rank's position in the ring
  int size;      ///< ring length (the world size)
  int left;      ///< rank that sends to us
  int right;     ///< rank we send to
};

/// The ring over ranks themselves (position = rank).
RingLayout rank_ring(const OpContext& ctx);
/// The ring over ranks relative to `root` (position = rank - root).
RingLayout rooted_ring(const OpContext& ctx, int root);

/// Blocks by position, in elements: block p is [offsets[p], offsets[p] + counts[p]) of the
/// buffer a phase works on. Both spans have RingLayout::size entries.
struct RingBlocks {
  std::span<const std::size_t> offsets;
  std::span<const std::size_t> counts;
};

/// `count` elements cut into `n` balanced blocks (patterns/block_partition.hpp), as the tables a
/// RingBlocks views.
struct BalancedBlocks {
  BalancedBlocks(std::size_t count, std::size_t n);
  RingBlocks view() const noexcept { return {offsets, counts}; }
  std::vector<std::size_t> offsets;
  std::vector<std::size_t> counts;
};

/// Reduce-scatter phase. `in` holds this rank's contribution to every block. Position p's final
/// block p = op over ranks of block p lands at `final_dst` (counts[p] elements; it may alias
/// in's block p). Partial results live at `accumulate` + offsets[b] when `accumulate` is not
/// null (it may equal `in` only if in's other blocks may be overwritten), otherwise in scratch.
/// Uses steps [first_step, first_step + returned) of ctx's tag space.
std::uint32_t ring_reduce_scatter(const OpContext& ctx, const RingLayout& ring, const std::byte* in,
                                  const RingBlocks& blocks, std::byte* accumulate,
                                  std::byte* final_dst, DType dtype, ReduceOp op,
                                  std::uint32_t first_step);

/// Allgather phase, in place: `buf` holds block `ring.position`; afterwards it holds all.
/// Uses steps [first_step, first_step + returned).
std::uint32_t ring_allgather(const OpContext& ctx, const RingLayout& ring, std::byte* buf,
                             const RingBlocks& blocks, DType dtype, std::uint32_t first_step);

}  // namespace cohort::algorithms
