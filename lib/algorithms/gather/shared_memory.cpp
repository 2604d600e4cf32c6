// Shared-memory gather(v), for communicators whose ranks all live on one host
// (transport/shared_arena.hpp).
//
// How it works: in round c every rank except the root copies piece c of its block (up to one
// 256 KiB slot) into its data slot and announces it; the root announces that it is done with the
// previous round, copies a share of its own block into place while the others fill their
// slots, then copies every announced piece into place, taking ranks in order from the one after
// it.
//
// Every rank knows every block's length (the counts are the same on all ranks), so all count
// the same ceil(largest block / 256 KiB) rounds without talking. Cost: each block is written
// into the arena once and read once, one handoff per round, against ceil(log2 n) message rounds
// of the binomial tree, where inner ranks forward their subtrees. Declines only without an arena.
//
// When no block but the root's is over 4 KiB (kEagerBytes), the blocks go through the eager lines
// instead (shared_arena.hpp): each non-root writes its block and returns, up to kEagerDepth
// (256; 64 over 56 bytes) gathers ahead of the root.

#include "algorithms/descriptor.hpp"
#include "algorithms/engines/arena_rounds.hpp"
#include "algorithms/engines/own_block.hpp"
#include "core/copy_bytes.hpp"

#include <algorithm>

namespace cohort::algorithms {
namespace {

/// One round moves up to one slot of every rank's block.
constexpr std::size_t kPiece = transport::SharedArena::kSlotBytes;

using Arena = transport::SharedArena;

/// Every non-root block at most kEagerBytes: through the eager lines.
void run_eager(const OpContext& ctx, Arena& arena, const GatherArgs& args) {
  const std::size_t es = dtype_size(args.dtype);
  // Named copies, not a structured binding: clang 14 cannot capture one in a lambda.
  const Arena::EagerStep step = arena.begin_eager();
  const std::uint64_t g = step.generation;
  const std::uint64_t e = step.eager;
  if (ctx.rank != args.root) {
    const std::size_t bytes = args.counts[static_cast<std::size_t>(ctx.rank)] * es;
    arena.wait_until_eager_free(e, bytes, ctx.deadline, ctx.what);
    copy_bytes(arena.eager_data(ctx.rank, e, bytes), args.in, bytes);
    arena.publish_eager(step);
  } else {
    auto* out = static_cast<std::byte*>(args.out);
    for (int k = 1; k < ctx.size; ++k) {
      const int r = (args.root + k) % ctx.size;
      const auto block = static_cast<std::size_t>(r);
      arena.wait_for_eager(r, e, g, ctx.deadline, ctx.what);
      const std::size_t bytes = args.counts[block] * es;
      copy_bytes(out + args.displs[block] * es, arena.eager_data(r, e, bytes), bytes);
    }
  }
  arena.publish(Arena::Flag::Consumed, e);
}

void run(const OpContext& ctx, const GatherArgs& args) {
  const auto n = static_cast<std::size_t>(ctx.size);
  const auto me = static_cast<std::size_t>(ctx.rank);
  const auto root = static_cast<std::size_t>(args.root);
  const std::size_t es = dtype_size(args.dtype);
  const auto* in = static_cast<const std::byte*>(args.in);
  auto* out = static_cast<std::byte*>(args.out);

  // Copied in shares between the rounds' waits.
  OwnBlock own = me == root ? OwnBlock::of(args) : OwnBlock{};
  const std::size_t rounds = n == 1 ? 0 : rounds_for_others(args.counts, es, root, kPiece);
  if (rounds == 1 && rounds_for_others(args.counts, es, root, Arena::kEagerBytes) == 1) {
    // The others write their eager lines meanwhile.
    own.copy_rest();
    run_eager(ctx, *ctx.arena(), args);
    return;
  }

  Arena* arena = rounds == 0 ? nullptr : ctx.arena();
  for (std::size_t c = 0; c < rounds; ++c) {
    const std::uint64_t g = arena->next_generation();
    if (me != root) {
      arena->wait_until_data_free(g, ctx.deadline, ctx.what);
      copy_bytes(arena->data(ctx.rank, g), in + c * kPiece,
                 round_bytes(args.counts[me] * es, c, kPiece));
      arena->publish(Arena::Flag::Arrived, g);
      continue;
    }
    // Done with the previous round's slots: the others may refill that parity next round.
    arena->publish(Arena::Flag::Arrived, g);
    own.copy_through_share(c, rounds);
    for (std::size_t k = 1; k < n; ++k) {
      const std::size_t r = (root + k) % n;
      arena->wait_for(static_cast<int>(r), Arena::Flag::Arrived, g, ctx.deadline, ctx.what);
      copy_bytes(out + args.displs[r] * es + c * kPiece, arena->data(static_cast<int>(r), g),
                 round_bytes(args.counts[r] * es, c, kPiece));
    }
  }
  own.copy_rest();
}

}  // namespace

extern const AlgorithmDescriptor gather_shared_memory =
    describe<run, alone_or_sharing_host<GatherArgs>>(
        Algorithm::SharedMemory,
        "Shared-memory gather(v), for communicators whose ranks all live on one host");

}  // namespace cohort::algorithms
