// Shared-memory broadcast, for communicators whose ranks all live on one host
// (transport/shared_arena.hpp).
//
// How it works: the root copies the vector into its data slot one piece at a time and announces
// each piece; every other rank announces that it is ready for a piece, waits for the root's, and
// copies it out. The root fills piece g + 1 while the others copy piece g out: it only waits for
// everyone to have announced g, i.e. to be done with piece g - 1, whose slot parity it reuses.
// An out-of-place root reads its input and copies each piece into its own output right after
// announcing it, while the others copy it out of the arena.
//
// A vector of at most 4 KiB goes through the root's eager lines instead (shared_arena.hpp):
// the root writes it and returns, up to kEagerDepth (256; 64 over 56 bytes) broadcasts ahead of
// the slowest rank, so a loop of small broadcasts costs the root a copy each rather than a round
// trip.
//
// Cost, m bytes: the root writes m into the arena once, and every other rank reads it once,
// whatever the world size; no rank forwards anything, unlike a tree. Declines only without an
// arena (ranks on several hosts, or COHORT_SHARED_MEMORY=off) on more than one rank.

#include "algorithms/broadcast/root_input.hpp"
#include "algorithms/descriptor.hpp"
#include "core/copy_bytes.hpp"

#include <algorithm>

namespace cohort::algorithms {

namespace {

using transport::SharedArena;
using Flag = SharedArena::Flag;

/// A vector of at most kEagerBytes, through the root's eager line.
void run_eager(const OpContext& ctx, SharedArena& arena, const BroadcastArgs& args,
               std::size_t bytes) {
  // Named copies, not a structured binding: clang 14 cannot capture one in a lambda.
  const SharedArena::EagerStep step = arena.begin_eager();
  const std::uint64_t g = step.generation;
  const std::uint64_t e = step.eager;
  if (ctx.rank == args.root) {
    arena.wait_until_eager_free(e, bytes, ctx.deadline, ctx.what);
    copy_bytes(arena.eager_data(ctx.rank, e, bytes), root_data(args), bytes);
    arena.publish_eager(step);
    copy_root_input(args);
  } else {
    arena.wait_for_eager(args.root, e, g, ctx.deadline, ctx.what);
    copy_bytes(args.out, arena.eager_data(args.root, e, bytes), bytes);
  }
  arena.publish(Flag::Consumed, e);
}

void run(const OpContext& ctx, const BroadcastArgs& args) {
  if (ctx.size == 1) {
    copy_root_input(args);
    return;
  }
  SharedArena* arena = ctx.arena();
  const std::size_t bytes = args.count * dtype_size(args.dtype);
  auto* buf = static_cast<std::byte*>(args.out);
  if (bytes > 0 && bytes <= SharedArena::kEagerBytes) {
    run_eager(ctx, *arena, args, bytes);
    return;
  }
  const std::size_t piece = SharedArena::kSlotBytes;
  for (std::size_t done = 0; done < bytes; done += piece) {
    const std::size_t length = std::min(piece, bytes - done);
    const std::uint64_t g = arena->next_generation();
    if (ctx.rank == args.root) {
      arena->wait_until_data_free(g, ctx.deadline, ctx.what);
      copy_bytes(arena->data(ctx.rank, g), root_data(args) + done, length);
      arena->publish(Flag::Arrived, g);
      copy_root_piece(args, done, length);
    } else {
      // Done with every earlier piece: the root may refill the parity this rank read last.
      arena->publish(Flag::Arrived, g);
      arena->wait_for(args.root, Flag::Arrived, g, ctx.deadline, ctx.what);
      copy_bytes(buf + done, arena->data(args.root, g), length);
    }
  }
}

}  // namespace

extern const AlgorithmDescriptor broadcast_shared_memory =
    describe<run, alone_or_sharing_host<BroadcastArgs>>(
        Algorithm::SharedMemory,
        "Shared-memory broadcast, for communicators whose ranks all live on one host");

}  // namespace cohort::algorithms
