// Shared-memory reduce, for communicators whose ranks all live on one host: every rank takes part
// in the arena's reduction engine (shared_memory_reduction.cpp describes the schemes). On up to 4
// ranks the others copy their input into the arena and the root reduces it all; from 5 ranks
// every rank reduces a share and only the root collects the result.
//
// Cost per rank, m bytes: input read once; the root writes the output once. From 5 ranks, unlike
// a tree, no rank reduces more than its 1/n share of a large vector. Declines only without an
// arena.
//
// A vector of at most 4 KiB (SharedArena::kEagerBytes) goes through the eager lines instead
// (shared_arena.hpp): each non-root writes its contribution into its line and returns, up to
// kEagerDepth (256; 64 over 56 bytes) reduces ahead of the root, and the root reduces the lines in
// rank order (as the engine does, so the same bits).

#include "algorithms/descriptor.hpp"
#include "algorithms/engines/rank_order_fold.hpp"
#include "algorithms/engines/shared_memory_reduction.hpp"
#include "core/copy_bytes.hpp"
#include "reduce/reduce.hpp"

#include <array>

namespace cohort::algorithms {

namespace {

using transport::SharedArena;
using Flag = SharedArena::Flag;

/// Up to this many ranks the root reduces every piece alone (the root scheme of
/// shared_memory_reduction.cpp): faster than the share scheme at every size measured on 2, 3
/// and 4 ranks (1.2-1.8x on 2 ranks, 1.03-1.7x on 3-4; bench/PERFORMANCE-LOG.md, reduce). Beyond,
/// the root's n-fold reading grows with the world while the share scheme spreads it; 2 cores cannot
/// tell where the two meet, so that stays untried.
constexpr int kRootReducesMaxRanks = 4;

/// A vector of at most kEagerBytes, through the non-roots' eager lines.
void run_eager(const OpContext& ctx, SharedArena& arena, const ReduceArgs& args,
               std::size_t bytes) {
  // Named copies, not a structured binding: clang 14 cannot capture one in a lambda.
  const SharedArena::EagerStep step = arena.begin_eager();
  const std::uint64_t g = step.generation;
  const std::uint64_t e = step.eager;
  if (ctx.rank != args.root) {
    arena.wait_until_eager_free(e, bytes, ctx.deadline, ctx.what);
    copy_bytes(arena.eager_data(ctx.rank, e, bytes), args.in, bytes);
    arena.publish_eager(step);
    arena.publish(Flag::Consumed, e);
    return;
  }
  for (int r = 0; r < ctx.size; ++r)
    if (r != ctx.rank) arena.wait_for_eager(r, e, g, ctx.deadline, ctx.what);
  alignas(64) std::array<std::byte, SharedArena::kEagerBytes> kept;
  const std::byte* own = static_cast<const std::byte*>(args.in);
  if (own_operand_needs_keeping(args.out == args.in, ctx.rank)) {
    copy_bytes(kept.data(), own, bytes);
    own = kept.data();
  }
  fold_in_rank_order(args.op, args.dtype, args.out, args.count, ctx.size,
                     [&](int r) { return r == ctx.rank ? own : arena.eager_data(r, e, bytes); });
  if (args.op == ReduceOp::Avg)
    reduce::divide_by(args.dtype, args.out, args.count, static_cast<std::size_t>(ctx.size));
  arena.publish(Flag::Consumed, e);
}

void run(const OpContext& ctx, const ReduceArgs& args) {
  const std::size_t bytes = args.count * dtype_size(args.dtype);
  if (ctx.size == 1) {
    if (args.out != args.in) copy_bytes(args.out, args.in, bytes);
    return;
  }
  if (bytes > 0 && bytes <= SharedArena::kEagerBytes) {
    run_eager(ctx, *ctx.arena(), args, bytes);
    return;
  }
  void* out = ctx.rank == args.root ? args.out : nullptr;
  if (ctx.size <= kRootReducesMaxRanks)
    shared_memory_reduction_at_root(ctx, args.in, out, args.count, args.dtype, args.op);
  else
    shared_memory_reduction(ctx, args.in, out, args.count, args.dtype, args.op);
}

}  // namespace

extern const AlgorithmDescriptor reduce_shared_memory =
    describe<run, alone_or_sharing_host<ReduceArgs>>(
        Algorithm::SharedMemory,
        "Shared-memory reduce, for communicators whose ranks all live on one host: every rank "
        "takes part");

}  // namespace cohort::algorithms
