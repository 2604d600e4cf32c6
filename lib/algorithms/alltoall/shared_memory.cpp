// Shared-memory alltoall(v), for communicators whose ranks all live on one host
// (transport/shared_arena.hpp).
//
// How it works: a rank's data slot is cut into n sub-slots, one per destination. In round c every
// rank copies piece c of each outgoing block into the destination's sub-slot and announces the
// round; then it copies its own sub-slot out of every other rank's slot into the matching
// receive block, taking ranks in ring order from the next one so that ranks spread their reads.
// A rank's block for itself is copied locally before round 0 (unless in place left it there).
//
// How many rounds: a rank knows only the blocks it sends and receives, while alltoallv blocks
// differ between rank pairs. So round 0 always runs, and each rank puts the rounds its own
// largest outgoing block needs into the inline bytes of that announcement; every rank reads all
// of them before it leaves round 0 and runs the maximum.
//
// Cost per rank: everything except its own block is copied into the arena once and out once,
// in ceil(largest block / (256 KiB / n)) rounds of one handoff each, against n - 1 matched
// message pairs per round trip for pairwise exchange. Declines without an arena, or when a
// sub-slot would be under one cache line (more than 4096 ranks).

#include "algorithms/descriptor.hpp"
#include "algorithms/engines/arena_rounds.hpp"
#include "core/copy_bytes.hpp"

#include <algorithm>
#include <cstring>

namespace cohort::algorithms {

namespace {

bool accepts(const OpContext& ctx, const AlltoallArgs&) {
  if (ctx.size == 1) return true;
  // sub_slot_bytes depends only on the world size, so every rank decides alike.
  return ctx.arena() != nullptr &&
         transport::SharedArena::sub_slot_bytes(static_cast<std::size_t>(ctx.size)) != 0;
}

void run(const OpContext& ctx, const AlltoallArgs& args) {
  transport::SharedArena* arena = ctx.arena();
  using Arena = transport::SharedArena;
  const auto n = static_cast<std::size_t>(ctx.size);
  const auto me = static_cast<std::size_t>(ctx.rank);
  const std::size_t sub = Arena::sub_slot_bytes(n);
  const std::size_t es = dtype_size(args.dtype);
  const auto* in = static_cast<const std::byte*>(args.in);
  auto* out = static_cast<std::byte*>(args.out);

  if (!args.own_block_in_place)
    copy_bytes(out + args.recv_displs[me] * es, in + args.send_displs[me] * es,
               std::min(args.send_counts[me], args.recv_counts[me]) * es);
  if (n == 1) return;
  if (args.uniform && args.send_counts[me] == 0) return;  // every block is empty

  const std::uint64_t my_rounds = rounds_for_others(args.send_counts, es, me, sub);

  // Round 0 runs always: it carries every rank's round count.
  std::uint64_t rounds = std::max<std::uint64_t>(1, my_rounds);
  for (std::uint64_t c = 0; c < rounds; ++c) {
    const std::uint64_t g = arena->next_generation();
    arena->wait_until_data_free(g, ctx.deadline, ctx.what);
    std::byte* slot = arena->data(ctx.rank, g);
    for (std::size_t j = 0; j < n; ++j) {
      if (j == me) continue;
      const std::size_t total = args.send_counts[j] * es;
      copy_bytes(slot + j * sub, in + args.send_displs[j] * es + c * sub,
                 round_bytes(total, c, sub));
    }
    if (c == 0) std::memcpy(arena->inline_data(ctx.rank, g), &my_rounds, sizeof my_rounds);
    arena->publish(Arena::Flag::Arrived, g);
    for (std::size_t k = 1; k < n; ++k) {
      const auto r = static_cast<int>((me + k) % n);
      arena->wait_for(r, Arena::Flag::Arrived, g, ctx.deadline, ctx.what);
      if (c == 0) {
        std::uint64_t theirs = 0;
        std::memcpy(&theirs, arena->inline_data(r, g), sizeof theirs);
        rounds = std::max(rounds, theirs);
      }
      const auto from = static_cast<std::size_t>(r);
      const std::size_t total = args.recv_counts[from] * es;
      copy_bytes(out + args.recv_displs[from] * es + c * sub, arena->data(r, g) + me * sub,
                 round_bytes(total, c, sub));
    }
  }
}

}  // namespace

extern const AlgorithmDescriptor alltoall_shared_memory = describe<run, accepts>(
    Algorithm::SharedMemory,
    "Shared-memory alltoall(v), for communicators whose ranks all live on one host");

}  // namespace cohort::algorithms
