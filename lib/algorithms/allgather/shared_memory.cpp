// Shared-memory allgather(v), for communicators whose ranks all live on one host
// (transport/shared_arena.hpp).
//
// How it works: blocks travel in pieces of one arena slot. For piece c, every rank copies piece c
// of its own block into its data slot (nothing when its block is shorter) and announces it, then
// copies piece c of every other rank's block into place, taking ranks in ring order from the
// next one so that ranks spread their reads over different slots.
//
// Cost per rank, total m bytes: its own block written into the arena once and every other block
// read once, in max-block / 256 KiB rounds of one handoff each. Accepts uneven blocks; declines
// only without an arena on more than one rank.

#include "algorithms/descriptor.hpp"
#include "core/copy_bytes.hpp"

#include <algorithm>

namespace cohort::algorithms {

namespace {

void run(const OpContext& ctx, const AllgatherArgs& args) {
  if (ctx.size == 1) return;
  transport::SharedArena* arena = ctx.arena();
  using Flag = transport::SharedArena::Flag;
  const std::size_t es = dtype_size(args.dtype);
  auto* buf = static_cast<std::byte*>(args.out);
  const int n = ctx.size;
  const int me = ctx.rank;
  const std::size_t piece = transport::SharedArena::kSlotBytes;
  const std::size_t largest = *std::max_element(args.counts.begin(), args.counts.end()) * es;
  // Bytes of rank r's block in piece c, and where they go.
  auto length = [&](int r, std::size_t at) {
    const std::size_t block = args.counts[static_cast<std::size_t>(r)] * es;
    return at < block ? std::min(piece, block - at) : 0;
  };
  auto place = [&](int r, std::size_t at) {
    return buf + args.displs[static_cast<std::size_t>(r)] * es + at;
  };
  for (std::size_t at = 0; at < largest; at += piece) {
    const std::uint64_t g = arena->next_generation();
    arena->wait_until_data_free(g, ctx.deadline, ctx.what);
    copy_bytes(arena->data(me, g), place(me, at), length(me, at));
    arena->publish(Flag::Arrived, g);
    for (int k = 1; k < n; ++k) {
      const int r = (me + k) % n;
      arena->wait_for(r, Flag::Arrived, g, ctx.deadline, ctx.what);
      copy_bytes(place(r, at), arena->data(r, g), length(r, at));
    }
  }
}

}  // namespace

extern const AlgorithmDescriptor allgather_shared_memory =
    describe<run, alone_or_sharing_host<AllgatherArgs>>(
        Algorithm::SharedMemory,
        "Shared-memory allgather(v), for communicators whose ranks all live on one host");

}  // namespace cohort::algorithms
