// Shared-memory broadcast, for communicators whose ranks all live on one host
// (transport/shared_arena.hpp).
//
// How it works: the root copies the vector into its data slot one piece at a time (a vector of
// at most 56 bytes rides in its flag's cache line) and announces each piece; every other rank
// announces that it is ready for a piece, waits for the root's, and copies it out. The root
// fills piece g + 1 while the others copy piece g out: it only waits for everyone to have
// announced g, i.e. to be done with piece g - 1, whose slot parity it reuses.
//
// Cost, m bytes: the root writes m into the arena once, and every other rank reads it once,
// whatever the world size; no rank forwards anything, unlike a tree. Declines only without an
// arena (ranks on several hosts, or COHORT_SHARED_MEMORY=off) on more than one rank.

#include "algorithms/descriptor.hpp"
#include "core/copy_bytes.hpp"

#include <algorithm>

namespace cohort::algorithms {

namespace {

void run(const OpContext& ctx, const BroadcastArgs& args) {
  if (ctx.size == 1) return;
  transport::SharedArena* arena = ctx.arena();
  using Flag = transport::SharedArena::Flag;
  const std::size_t bytes = args.count * dtype_size(args.dtype);
  auto* buf = static_cast<std::byte*>(args.out);
  const bool tiny = bytes <= transport::SharedArena::kInlineBytes;
  const std::size_t piece = transport::SharedArena::kSlotBytes;
  for (std::size_t done = 0; done < bytes; done += piece) {
    const std::size_t length = std::min(piece, bytes - done);
    const std::uint64_t g = arena->next_generation();
    if (ctx.rank == args.root) {
      arena->wait_until_data_free(g, ctx.deadline, ctx.what);
      copy_bytes(tiny ? arena->inline_data(ctx.rank, g) : arena->data(ctx.rank, g), buf + done,
                 length);
      arena->publish(Flag::Arrived, g);
    } else {
      // Done with every earlier piece: the root may refill the parity this rank read last.
      arena->publish(Flag::Arrived, g);
      arena->wait_for(args.root, Flag::Arrived, g, ctx.deadline, ctx.what);
      copy_bytes(buf + done, tiny ? arena->inline_data(args.root, g) : arena->data(args.root, g),
                 length);
    }
  }
}

}  // namespace

extern const AlgorithmDescriptor broadcast_shared_memory =
    describe<run, alone_or_sharing_host<BroadcastArgs>>(
        Algorithm::SharedMemory,
        "Shared-memory broadcast, for communicators whose ranks all live on one host");

}  // namespace cohort::algorithms
