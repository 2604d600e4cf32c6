// Shared-memory scatter(v), for communicators whose ranks all live on one host
// (transport/shared_arena.hpp).
//
// How it works: the root's data slot is cut into n sub-slots, one per destination. In round c
// the root copies piece c of every other rank's block into that rank's sub-slot and announces the
// round; each other rank announces that it is done with the previous round, waits for the root
// and copies piece c of its sub-slot into its output. The root copies its own block into its
// output a share per round, after announcing the round, while the others copy theirs out.
//
// Every rank knows every block's length (the counts are the same on all ranks), so all count
// the same ceil(largest block / (256 KiB / n)) rounds without talking. Cost: the root writes
// every other block into the arena once and each rank reads its own once, one handoff per round,
// against ceil(log2 n) message rounds of the binomial tree, where inner ranks forward subtrees.
// Declines without an arena, or when a sub-slot would be under one cache line (over 4096 ranks).
//
// When the other ranks' blocks come to at most 4 KiB (kEagerBytes) together, they go through the
// root's eager lines instead (shared_arena.hpp), packed in rank order: the root writes them and
// returns, up to SharedArena::kEagerDepth (256) scatters ahead of the slowest rank (64, the
// areas' depth, with more than 56 bytes), as the eager broadcast does.

#include "algorithms/descriptor.hpp"
#include "algorithms/engines/arena_rounds.hpp"
#include "algorithms/engines/own_block.hpp"
#include "core/check.hpp"
#include "core/copy_bytes.hpp"

#include <algorithm>

namespace cohort::algorithms {

namespace {

using Arena = transport::SharedArena;

/// The bytes of every block but the root's that come before rank `until`'s (all of them when
/// `until` is the world size): where a rank's block sits in the root's packed eager line.
std::size_t packed_before(const ScatterArgs& args, std::size_t es, std::size_t until) {
  return algorithms::packed_before(args.counts, es, static_cast<std::size_t>(args.root), until);
}

/// The other ranks' blocks, `packed` bytes in all (at most kEagerBytes), through the root's
/// eager line.
void run_eager(const OpContext& ctx, Arena& arena, const ScatterArgs& args, std::size_t packed,
               OwnBlock& own) {
  const std::size_t es = dtype_size(args.dtype);
  const auto me = static_cast<std::size_t>(ctx.rank);
  // Named copies, not a structured binding: clang 14 cannot capture one in a lambda.
  const Arena::EagerStep step = arena.begin_eager();
  const std::uint64_t g = step.generation;
  const std::uint64_t e = step.eager;
  if (ctx.rank == args.root) {
    arena.wait_until_eager_free(e, packed, ctx.deadline, ctx.what);
    std::byte* line = arena.eager_data(ctx.rank, e, packed);
    const auto* in = static_cast<const std::byte*>(args.in);
    std::size_t at = 0;
    for (std::size_t r = 0; r < args.counts.size(); ++r) {
      if (r == me) continue;
      copy_bytes(line + at, in + args.displs[r] * es, args.counts[r] * es);
      at += args.counts[r] * es;
    }
    COHORT_CHECK(at == packed);
    arena.publish_eager(step);
    own.copy_rest();  // while the others copy theirs out
  } else {
    arena.wait_for_eager(args.root, e, g, ctx.deadline, ctx.what);
    copy_bytes(args.out, arena.eager_data(args.root, e, packed) + packed_before(args, es, me),
               args.counts[me] * es);
  }
  arena.publish(Arena::Flag::Consumed, e);
}

bool accepts(const OpContext& ctx, const ScatterArgs&) {
  if (ctx.size == 1) return true;
  // sub_slot_bytes depends only on the world size, so every rank decides alike.
  return ctx.arena() != nullptr &&
         transport::SharedArena::sub_slot_bytes(static_cast<std::size_t>(ctx.size)) != 0;
}

void run(const OpContext& ctx, const ScatterArgs& args) {
  Arena* arena = ctx.arena();
  const auto n = static_cast<std::size_t>(ctx.size);
  const auto me = static_cast<std::size_t>(ctx.rank);
  const auto root = static_cast<std::size_t>(args.root);
  const std::size_t sub = Arena::sub_slot_bytes(n);
  const std::size_t es = dtype_size(args.dtype);
  const auto* in = static_cast<const std::byte*>(args.in);
  auto* out = static_cast<std::byte*>(args.out);

  OwnBlock own = me == root ? OwnBlock::of(args) : OwnBlock{};
  const std::size_t packed = n == 1 ? 0 : packed_before(args, es, n);
  if (packed > 0 && packed <= Arena::kEagerBytes) {
    run_eager(ctx, *arena, args, packed, own);
    return;
  }
  const std::size_t rounds = rounds_for_others(args.counts, es, root, sub);

  for (std::size_t c = 0; c < rounds; ++c) {
    const std::uint64_t g = arena->next_generation();
    if (me == root) {
      arena->wait_until_data_free(g, ctx.deadline, ctx.what);
      std::byte* slot = arena->data(ctx.rank, g);
      for (std::size_t r = 0; r < n; ++r) {
        if (r == root) continue;
        copy_bytes(slot + r * sub, in + args.displs[r] * es + c * sub,
                   round_bytes(args.counts[r] * es, c, sub));
      }
      arena->publish(Arena::Flag::Arrived, g);
      own.copy_through_share(c, rounds);
    } else {
      // Done with the root's previous piece: the root may refill that slot parity next round.
      arena->publish(Arena::Flag::Arrived, g);
      arena->wait_for(args.root, Arena::Flag::Arrived, g, ctx.deadline, ctx.what);
      copy_bytes(out + c * sub, arena->data(args.root, g) + me * sub,
                 round_bytes(args.counts[me] * es, c, sub));
    }
  }
  own.copy_rest();
}

}  // namespace

extern const AlgorithmDescriptor scatter_shared_memory = describe<run, accepts>(
    Algorithm::SharedMemory,
    "Shared-memory scatter(v), for communicators whose ranks all live on one host");

}  // namespace cohort::algorithms
