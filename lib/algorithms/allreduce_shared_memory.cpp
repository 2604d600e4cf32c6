// Shared-memory allreduce: for ranks that all live on one host (transport/shared_arena.hpp).
//
// How it works: the vector is cut into pieces of one arena slot. For each piece, every rank
// copies its contribution into its data slot and announces it. Then:
// - small pieces (at most kDirectMaxBytes): every rank reduces all n slots straight into its
//   output. One handoff per piece; the n-fold reading is cheaper than a second handoff.
// - larger pieces: rank r reduces only share r of the piece (a 1/n block) from all slots into
//   its result slot and announces it; every rank then copies each share from its owner's result
//   slot into its output, waiting for owners one at a time so copying overlaps stragglers.
// Operands are combined in rank order (slot 0 op slot 1 op ...), so every element is reduced
// identically whichever rank computes it, and all ranks get identical bits.
//
// Cost per rank, m bytes: the user's input is read once and the output written once; the
// arena's slots are touched while cache-resident (a piece from every rank is n * 256 KiB).
// Two handoffs per large piece, one per small piece. Accepts every world size, dtype and count;
// declines only without an arena (ranks on several hosts, or COHORT_SHARED_MEMORY=off) on
// more than one rank.

#include "algorithms/implementations.hpp"
#include "core/copy_bytes.hpp"
#include "core/stream_copy.hpp"
#include "patterns/block_partition.hpp"
#include "reduce/reduce.hpp"

#include <algorithm>

namespace cohort::algorithms {
namespace {

using transport::SharedArena;

/// Pieces up to this size are reduced whole by every rank. Measured (README, shared memory):
/// below it the second handoff of the share scheme costs more than the redundant reduction.
constexpr std::size_t kDirectMaxBytes = 16 * 1024;

/// Out-of-place outputs from this size on are written with non-temporal stores
/// (core/stream_copy.hpp): they exceed what the caches could keep anyway.
constexpr std::size_t kStreamOutputMinBytes = 8 * 1024 * 1024;

/// Where rank r's contribution to piece `generation` of `bytes` bytes lives.
std::byte* contribution(const SharedArena& arena, int r, std::uint64_t generation,
                        std::size_t bytes) {
  return bytes <= SharedArena::kInlineBytes ? arena.inline_data(r, generation)
                                            : arena.data(r, generation);
}

/// dst = slot_0 op slot_1 op ... op slot_{n-1}, each slot at `offset` bytes into the piece.
void reduce_slots(const SharedArena& arena, std::uint64_t generation, std::size_t piece_bytes,
                  std::size_t offset, std::byte* dst, std::size_t count, DType dtype,
                  ReduceOp op) {
  if (count == 0) return;
  auto slot = [&](int r) { return contribution(arena, r, generation, piece_bytes) + offset; };
  reduce::reduce_to(op, dtype, dst, slot(0), slot(1), count);
  for (int r = 2; r < arena.size(); ++r) reduce::reduce_into(op, dtype, dst, slot(r), count);
}

}  // namespace

bool allreduce_shared_memory(const OpContext& ctx, const AllreduceArgs& args) {
  const std::size_t es = dtype_size(args.dtype);
  const auto* in = static_cast<const std::byte*>(args.in);
  auto* out = static_cast<std::byte*>(args.out);
  if (ctx.size == 1) {
    if (out != in) copy_bytes(out, in, args.count * es);
    return true;
  }
  SharedArena* arena = ctx.arena;
  if (arena == nullptr) return false;
  const int n = ctx.size;
  const int me = ctx.rank;
  const std::size_t piece_elems = SharedArena::kSlotBytes / es;
  // In place, the output lines were just read for the copy-in and are cached: plain stores win.
  const bool stream_output = out != in && args.count * es >= kStreamOutputMinBytes;
  const auto copy_out = stream_output ? stream_copy : copy_bytes;

  for (std::size_t done = 0; done < args.count; done += piece_elems) {
    const std::size_t count = std::min(piece_elems, args.count - done);
    const std::size_t bytes = count * es;
    const std::uint64_t g = arena->next_generation();
    copy_bytes(contribution(*arena, me, g, bytes), in + done * es, bytes);
    arena->publish(SharedArena::Flag::Arrived, g);
    arena->wait_for_all(SharedArena::Flag::Arrived, g, ctx.deadline, ctx.what);
    std::byte* dst = out + done * es;
    if (bytes <= kDirectMaxBytes) {
      reduce_slots(*arena, g, bytes, 0, dst, count, args.dtype, args.op);
      continue;
    }
    const auto mine = patterns::balanced_block(count, static_cast<std::size_t>(n),
                                               static_cast<std::size_t>(me));
    reduce_slots(*arena, g, bytes, mine.offset * es, arena->result(me, g) + mine.offset * es,
                 mine.count, args.dtype, args.op);
    arena->publish(SharedArena::Flag::Reduced, g);
    // Own share first (already here), then the others in ring order from the next rank, so
    // ranks spread their reads over different owners' slots.
    for (int k = 0; k < n; ++k) {
      const int owner = (me + k) % n;
      if (owner != me) arena->wait_for(owner, SharedArena::Flag::Reduced, g, ctx.deadline, ctx.what);
      const auto share = patterns::balanced_block(count, static_cast<std::size_t>(n),
                                                  static_cast<std::size_t>(owner));
      copy_out(dst + share.offset * es, arena->result(owner, g) + share.offset * es,
               share.count * es);
    }
  }
  return true;
}

}  // namespace cohort::algorithms
