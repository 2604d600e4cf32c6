// Reduce-scatter + gather reduce (Rabenseifner's reduce), for large messages.
//
// How it works: a chunked, pipelined ring reduce-scatter (ring_pipeline.hpp) over n balanced
// blocks leaves rank r with the complete block r (written straight into `out` on the root);
// every other rank then sends its block to the root, which receives them in place.
//
// Cost, n ranks, m bytes: n - 1 ring steps moving and reducing (n - 1)/n * m per rank, then one
// gather round in which the root receives (n - 1)/n * m. The tree reduce instead makes the root
// receive and reduce log2(n) * m. Accepts every world size, root and count. The ring's
// combining order is fixed by the world size, so the result is deterministic.
// Scratch: the ring's slots, this rank's final block (kSlotWork0, non-roots) and, on a root in
// place, a copy of its input (kSlotWork1).

#include "algorithms/descriptor.hpp"
#include "algorithms/engines/point_to_point.hpp"
#include "algorithms/engines/ring_pipeline.hpp"
#include "algorithms/engines/scratch_slots.hpp"
#include "core/copy_bytes.hpp"
#include "patterns/block_partition.hpp"

#include <cstring>
#include <vector>

namespace cohort::algorithms {

namespace {

void run(const OpContext& ctx, const ReduceArgs& args) {
  const std::size_t es = dtype_size(args.dtype);
  const auto* in = static_cast<const std::byte*>(args.in);
  auto* out = static_cast<std::byte*>(args.out);
  if (args.count == 0) return;
  if (ctx.size == 1) {
    if (out != in) copy_bytes(out, in, args.count * es);
    return;
  }
  const auto n = static_cast<std::size_t>(ctx.size);
  const BalancedBlocks table(args.count, n);
  const std::vector<std::size_t>& offsets = table.offsets;
  const std::vector<std::size_t>& counts = table.counts;
  const bool is_root = ctx.rank == args.root;
  const auto me = static_cast<std::size_t>(ctx.rank);
  // In place, the root's output is its input. The ring pipeline does not promise to read every
  // chunk of its input before it writes the final block, so that root works on a copy.
  if (is_root && in == out) {
    std::byte* copy = ctx.scratch.get(args.count * es, kSlotWork1);
    copy_bytes(copy, in, args.count * es);
    in = copy;
  }
  // 1. Reduce-scatter: block r ends on rank r (in place in `out` on the root).
  std::byte* mine = is_root ? out + offsets[me] * es : ctx.scratch.get(counts[me] * es, kSlotWork0);
  const std::uint32_t gather_step = ring_reduce_scatter(
      ctx, rank_ring(ctx), in, RingBlocks{offsets, counts}, nullptr, mine, args.dtype, args.op, 0);
  // 2. Gather the complete blocks on the root.
  RequestBatch gather(ctx);
  if (is_root) {
    for (int r = 0; r < ctx.size; ++r)
      if (r != ctx.rank) gather.recv(r, out + offsets[r] * es, counts[r] * es, gather_step);
  } else {
    gather.send(args.root, mine, counts[me] * es, gather_step);
  }
  gather.wait();
}

}  // namespace

extern const AlgorithmDescriptor reduce_reduce_scatter_gather =
    describe<run>(Algorithm::ReduceScatterGather,
                  "Reduce-scatter + gather reduce (Rabenseifner's reduce), for large messages");

}  // namespace cohort::algorithms
