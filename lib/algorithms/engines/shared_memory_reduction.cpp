// The shared-memory reduction engine (see shared_memory_reduction.hpp).
//
// How it works: the vector is cut into pieces of one arena slot.
// - Small vectors (at most kDirectMaxBytes, one piece): every rank copies its contribution into
//   its slot (inline in the flag's cache line when tiny) and announces it; every rank with an
//   output reduces all n slots straight into it. One handoff; the n-fold reading is cheaper than
//   a second one.
// - Larger vectors: each piece is split into n shares, and rank r owns share r. A rank copies
//   the other ranks' shares of its piece into its data slot, announces it, reduces its own share
//   from everyone's slots (its own contribution read straight from its input) into its result
//   slot, announces that, and (with an output) copies every share from its owner's result slot.
//   The next piece is copied in and announced before this piece is copied out, so a rank's
//   copy-in overlaps the other ranks' reductions and a straggler delays, but does not serialise,
//   the pipeline.
// - Reduce to one rank (shared_memory_reduction_at_root): the other ranks copy each piece into
//   their data slots and announce it; the root reduces all of them, its own contribution read
//   straight from its input, into its output. The others copy the next piece in while the root
//   reduces this one. No result slot and no second handoff: on 2 ranks it was 1.2-1.8x faster
//   than the share scheme from 16 KiB to 4 MiB, on 3-4 ranks of a 2-core host 1.03-1.7x
//   (bench/PERFORMANCE-LOG.md, reduce), but the root reads all n contributions, which the share
//   scheme spreads over every rank.
// Operands are combined in rank order (rank 0 op rank 1 op ...), so every element is reduced
// identically whichever rank computes it, and all ranks get identical bits. Avg combines like Sum
// and is divided by n here, where the sums are still in cache: by each share's owner in its
// result slot, or by every rank in its output on the direct path (the same divide_by the
// communicator would otherwise run over the whole output afterwards, so the same bits).
//
// Cost per rank, m bytes: the input is read once and the output written once; the arena's slots
// are touched while cache-resident (a piece from every rank is n * 256 KiB). Slot reuse follows
// the arena's rule (shared_arena.hpp): Arrived(g + 1) is announced after the reduction of piece
// g and the copy-out of piece g - 1; a non-root of reduce reads nothing.

#include "algorithms/engines/shared_memory_reduction.hpp"

#include "algorithms/engines/rank_order_fold.hpp"

#include "core/check.hpp"
#include "core/copy_bytes.hpp"
#include "core/stream_copy.hpp"
#include "patterns/block_partition.hpp"
#include "reduce/reduce.hpp"

#include <algorithm>

namespace cohort::algorithms {
namespace {

using transport::SharedArena;

/// Pieces up to this size are reduced whole by every rank. Measured (bench/PERFORMANCE-LOG.md,
/// shared memory): below it the second handoff of the share scheme costs more than the redundant
/// reduction.
constexpr std::size_t kDirectMaxBytes = 16 * 1024;

/// Where rank r's contribution to piece `generation` lives: next to its flag (a tiny vector on
/// the direct path) or in its data slot.
std::byte* contribution(const SharedArena& arena, int r, std::uint64_t generation, bool tiny) {
  return tiny ? arena.inline_data(r, generation) : arena.data(r, generation);
}

/// dst = op over ranks r (in rank order) of rank r's contribution at `offset` bytes into the
/// piece: its slot, or `own` for this rank when not null.
void reduce_slots(const SharedArena& arena, std::uint64_t generation, bool tiny, std::size_t offset,
                  const std::byte* own, std::byte* dst, std::size_t count, DType dtype,
                  ReduceOp op) {
  fold_in_rank_order(op, dtype, dst, count, arena.size(), [&](int r) -> const std::byte* {
    if (own != nullptr && r == arena.rank()) return own;
    return contribution(arena, r, generation, tiny) + offset;
  });
}

/// The pieces of a vector and each piece's share of one rank, in elements.
struct Pieces {
  std::size_t count;        ///< elements in the vector
  std::size_t piece_elems;  ///< elements per piece (the last may be shorter)
  std::size_t n;            ///< ranks

  std::size_t number() const noexcept { return (count + piece_elems - 1) / piece_elems; }
  std::size_t offset(std::size_t i) const noexcept { return i * piece_elems; }
  std::size_t length(std::size_t i) const noexcept {
    return std::min(piece_elems, count - offset(i));
  }
  patterns::BlockRange share(std::size_t i, int r) const noexcept {
    return patterns::balanced_block(length(i), n, static_cast<std::size_t>(r));
  }
};

/// One op's pieces through the share scheme (see the top of the file).
void reduce_in_shares(const OpContext& ctx, SharedArena& arena, const std::byte* in, std::byte* out,
                      std::size_t count, DType dtype, ReduceOp op) {
  const std::size_t es = dtype_size(dtype);
  const int n = ctx.size;
  const int me = ctx.rank;
  const Pieces pieces{count, SharedArena::kSlotBytes / es, static_cast<std::size_t>(n)};
  // In place, the output lines were just read for the copy-in and are cached: plain stores win.
  const bool stream_output = out != nullptr && out != in && count * es >= kStreamOutputMinBytes;
  const auto copy_out = stream_output ? stream_copy : copy_bytes;

  // Everything of piece i except this rank's share goes into the slot: the others read it.
  auto copy_in = [&](std::size_t i, std::uint64_t g) {
    const auto mine = pieces.share(i, me);
    const std::byte* from = in + pieces.offset(i) * es;
    std::byte* slot = arena.data(me, g);
    copy_bytes(slot, from, mine.offset * es);
    const std::size_t after = mine.offset + mine.count;
    copy_bytes(slot + after * es, from + after * es, (pieces.length(i) - after) * es);
    arena.publish(SharedArena::Flag::Arrived, g);
  };

  std::uint64_t g = arena.next_generation();
  arena.wait_until_data_free(g, ctx.deadline, ctx.what);
  copy_in(0, g);
  for (std::size_t i = 0; i < pieces.number(); ++i) {
    const auto mine = pieces.share(i, me);
    arena.wait_for_all(SharedArena::Flag::Arrived, g, ctx.deadline, ctx.what);
    std::byte* result = arena.result(me, g) + mine.offset * es;
    reduce_slots(arena, g, false, mine.offset * es, in + (pieces.offset(i) + mine.offset) * es,
                 result, mine.count, dtype, op);
    if (op == ReduceOp::Avg && mine.count > 0)
      reduce::divide_by(dtype, result, mine.count, static_cast<std::size_t>(n));
    arena.publish(SharedArena::Flag::Reduced, g);
    // Start the next piece before finishing this one: every peer announced Arrived(g), so the
    // data slot for g + 1 is free.
    const std::uint64_t this_piece = g;
    if (i + 1 < pieces.number()) {
      g = arena.next_generation();
      copy_in(i + 1, g);
    }
    if (out == nullptr) continue;  // reduce: only the root collects the shares
    // Own share first (already here), then the others in ring order from the next rank, so
    // ranks spread their reads over different owners' slots.
    std::byte* dst = out + pieces.offset(i) * es;
    for (int k = 0; k < n; ++k) {
      const int owner = (me + k) % n;
      if (owner != me)
        arena.wait_for(owner, SharedArena::Flag::Reduced, this_piece, ctx.deadline, ctx.what);
      const auto share = pieces.share(i, owner);
      copy_out(dst + share.offset * es, arena.result(owner, this_piece) + share.offset * es,
               share.count * es);
    }
  }
}

/// One op's pieces through the root scheme (see the top of the file).
void reduce_at_root(const OpContext& ctx, SharedArena& arena, const std::byte* in, std::byte* out,
                    std::size_t count, DType dtype, ReduceOp op) {
  const std::size_t es = dtype_size(dtype);
  const int me = ctx.rank;
  const Pieces pieces{count, SharedArena::kSlotBytes / es, 1};
  // In place on a root after rank 1, the fold would overwrite the root's own operand before its
  // turn: its contribution goes through its slot like the others'.
  const bool own_through_slot = out != nullptr && own_operand_needs_keeping(out == in, me);
  const bool copies_in = out == nullptr || own_through_slot;
  for (std::size_t i = 0; i < pieces.number(); ++i) {
    const std::uint64_t g = arena.next_generation();
    const std::size_t offset = pieces.offset(i) * es;
    const std::size_t length = pieces.length(i);
    if (copies_in) {
      arena.wait_until_data_free(g, ctx.deadline, ctx.what);
      copy_bytes(arena.data(me, g), in + offset, length * es);
    }
    // The root too announces every piece: it reads no slot of an older one any more.
    arena.publish(SharedArena::Flag::Arrived, g);
    if (out == nullptr) {
      // A non-root waits for the others once, at the first piece (the root announces it as it
      // starts): that compares their announcements, so ranks that disagree about the op (its
      // size, its root) fail in it instead of returning as if it had run.
      if (i == 0) arena.wait_for_all(SharedArena::Flag::Arrived, g, ctx.deadline, ctx.what);
      continue;
    }
    arena.wait_for_all(SharedArena::Flag::Arrived, g, ctx.deadline, ctx.what);
    reduce_slots(arena, g, false, 0, own_through_slot ? nullptr : in + offset, out + offset, length,
                 dtype, op);
    if (op == ReduceOp::Avg)
      reduce::divide_by(dtype, out + offset, length, static_cast<std::size_t>(ctx.size));
  }
}

}  // namespace

void shared_memory_reduction(const OpContext& ctx, const void* in_ptr, void* out_ptr,
                             std::size_t count, DType dtype, ReduceOp op) {
  SharedArena* arena = ctx.arena();
  COHORT_CHECK(arena != nullptr && ctx.size >= 2);
  const auto* in = static_cast<const std::byte*>(in_ptr);
  auto* out = static_cast<std::byte*>(out_ptr);
  const std::size_t bytes = count * dtype_size(dtype);
  if (bytes == 0) return;
  if (bytes > kDirectMaxBytes) {
    reduce_in_shares(ctx, *arena, in, out, count, dtype, op);
    return;
  }
  static_assert(kDirectMaxBytes <= SharedArena::kSlotBytes, "a direct vector is one piece");
  const std::uint64_t g = arena->next_generation();
  const bool tiny = bytes <= SharedArena::kInlineBytes;
  arena->wait_until_data_free(g, ctx.deadline, ctx.what);
  copy_bytes(contribution(*arena, ctx.rank, g, tiny), in, bytes);
  arena->publish(SharedArena::Flag::Arrived, g);
  if (out == nullptr) return;  // reduce: a non-root's part ends with its contribution
  arena->wait_for_all(SharedArena::Flag::Arrived, g, ctx.deadline, ctx.what);
  reduce_slots(*arena, g, tiny, 0, nullptr, out, count, dtype, op);
  if (op == ReduceOp::Avg) reduce::divide_by(dtype, out, count, static_cast<std::size_t>(ctx.size));
}

void shared_memory_reduction_at_root(const OpContext& ctx, const void* in, void* out,
                                     std::size_t count, DType dtype, ReduceOp op) {
  SharedArena* arena = ctx.arena();
  COHORT_CHECK(arena != nullptr && ctx.size >= 2);
  if (count == 0) return;
  reduce_at_root(ctx, *arena, static_cast<const std::byte*>(in), static_cast<std::byte*>(out),
                 count, dtype, op);
}

}  // namespace cohort::algorithms
