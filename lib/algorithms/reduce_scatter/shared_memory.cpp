// Shared-memory reduce_scatter, for communicators whose ranks all live on one host
// (transport/shared_arena.hpp).
//
// How it works: each rank's input is n blocks, and rank r's output is the reduction of everyone's
// block r. Blocks travel in pieces: for piece c, every rank copies piece c of each of its n blocks
// side by side into its data slot and announces it; rank r then reduces piece c of block r from
// all n slots, in rank order, straight into its output. Copying its own block as well keeps
// every operand out of the output, which may alias the input's block r.
//
// Cost per rank, n * m input bytes: the input read once, the output (m) written once, each block
// crossing the arena once, in m / (256 KiB / n) rounds of one handoff each. Declines only without
// an arena on more than one rank.

#include "algorithms/descriptor.hpp"
#include "algorithms/engines/rank_order_fold.hpp"
#include "core/copy_bytes.hpp"
#include "reduce/reduce.hpp"

#include <algorithm>

namespace cohort::algorithms {

namespace {

void run(const OpContext& ctx, const ReduceScatterArgs& args) {
  const std::size_t es = dtype_size(args.dtype);
  const auto* in = static_cast<const std::byte*>(args.in);
  auto* out = static_cast<std::byte*>(args.out);
  if (ctx.size == 1) {
    if (out != in) copy_bytes(out, in, args.count * es);
    return;
  }
  transport::SharedArena* arena = ctx.arena();
  using Flag = transport::SharedArena::Flag;
  const auto n = static_cast<std::size_t>(ctx.size);
  const auto me = static_cast<std::size_t>(ctx.rank);
  // Elements of one block per piece: n of them share a slot.
  const std::size_t piece = std::max<std::size_t>(1, transport::SharedArena::kSlotBytes / n / es);
  for (std::size_t at = 0; at < args.count; at += piece) {
    const std::size_t length = std::min(piece, args.count - at);
    const std::uint64_t g = arena->next_generation();
    arena->wait_until_data_free(g, ctx.deadline, ctx.what);
    std::byte* slot = arena->data(ctx.rank, g);
    for (std::size_t b = 0; b < n; ++b)
      copy_bytes(slot + b * piece * es, in + (b * args.count + at) * es, length * es);
    arena->publish(Flag::Arrived, g);
    arena->wait_for_all(Flag::Arrived, g, ctx.deadline, ctx.what);
    fold_in_rank_order(args.op, args.dtype, out + at * es, length, ctx.size,
                       [&](int r) { return arena->data(r, g) + me * piece * es; });
  }
}

}  // namespace

extern const AlgorithmDescriptor reduce_scatter_shared_memory =
    describe<run, alone_or_sharing_host<ReduceScatterArgs>>(
        Algorithm::SharedMemory,
        "Shared-memory reduce_scatter, for communicators whose ranks all live on one host");

}  // namespace cohort::algorithms
