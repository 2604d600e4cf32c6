// Ring allgather.
//
// How it works: rank r starts with its block in place; for n - 1 steps it forwards to its right
// neighbour the block it received last step (its own at first) and receives the next block from
// its left, straight into place. Chunked and pipelined like every ring phase (ring_pipeline.hpp).
//
// Cost, n ranks, total m bytes: n - 1 steps, each rank sending and receiving m - m_r bytes
// (m_r its own block): bandwidth-optimal, latency linear in n. Handles allgatherv (any counts
// and displacements), every world size and count.

#include "algorithms/descriptor.hpp"
#include "algorithms/engines/ring_pipeline.hpp"

namespace cohort::algorithms {

namespace {

void run(const OpContext& ctx, const AllgatherArgs& args) {
  if (ctx.size == 1) return;
  ring_allgather(ctx, rank_ring(ctx), static_cast<std::byte*>(args.out),
                 RingBlocks{args.displs, args.counts}, args.dtype, 0);
}

}  // namespace

extern const AlgorithmDescriptor allgather_ring = describe<run>(Algorithm::Ring, "Ring allgather");

}  // namespace cohort::algorithms
