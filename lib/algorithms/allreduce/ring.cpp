// Ring allreduce: a ring reduce-scatter followed by a ring allgather (Patarasuka & Yuan's
// bandwidth-optimal schedule, as in NCCL and Gloo).
//
// How it works: the vector is cut into `size` balanced blocks. In the reduce-scatter phase each
// block travels once around the ring, every rank adding its contribution as it passes
// (out[b] = in[b] op received, written straight into the output, so no copy of `in` is made);
// after size - 1 steps rank r holds the complete block r. The allgather phase then circulates
// the complete blocks for another size - 1 steps. Both phases are chunked (kRingChunkBytes) and
// pipelined: the next chunk is on the wire while this one is reduced.
//
// Cost, n ranks, m bytes: 2(n - 1) steps (times chunks per block); each rank sends and
// receives 2(n - 1)/n * m bytes and reduces (n - 1)/n * m elements. Bandwidth-optimal, but
// latency grows linearly with n: the selection table uses it for large messages.
// Accepts every world size and count.

#include "algorithms/descriptor.hpp"
#include "algorithms/engines/ring_pipeline.hpp"
#include "core/copy_bytes.hpp"
#include "patterns/block_partition.hpp"

#include <cstring>
#include <vector>

namespace cohort::algorithms {

namespace {

void run(const OpContext& ctx, const AllreduceArgs& args) {
  const std::size_t es = dtype_size(args.dtype);
  const auto* in = static_cast<const std::byte*>(args.in);
  auto* out = static_cast<std::byte*>(args.out);
  if (ctx.size == 1 || args.count == 0) {
    if (out != in && args.count > 0) copy_bytes(out, in, args.count * es);
    return;
  }
  const auto n = static_cast<std::size_t>(ctx.size);
  const BalancedBlocks table(args.count, n);
  const std::vector<std::size_t>& offsets = table.offsets;
  const std::vector<std::size_t>& counts = table.counts;
  const RingBlocks blocks{offsets, counts};
  const RingLayout ring = rank_ring(ctx);
  // Phase 1: partial sums accumulate in `out` (each block is written once per rank), and rank
  // r's complete block r lands at out's block r.
  const std::uint32_t used = ring_reduce_scatter(
      ctx, ring, in, blocks, out, out + offsets[ring.position] * es, args.dtype, args.op, 0);
  // Phase 2: circulate the complete blocks.
  ring_allgather(ctx, ring, out, blocks, args.dtype, used);
}

}  // namespace

extern const AlgorithmDescriptor allreduce_ring = describe<run>(
    Algorithm::Ring,
    "Ring allreduce: a ring reduce-scatter followed by a ring allgather (Patarasuka & Yuan's");

}  // namespace cohort::algorithms
