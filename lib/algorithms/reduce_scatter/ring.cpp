// Ring reduce-scatter.
//
// How it works: block b (count elements at b * count in `in`) travels once around the ring,
// each rank adding its contribution as it passes, so that after n - 1 steps rank r holds the
// complete block r, written straight into `out` by the last step (ring_pipeline.hpp). Partial
// results live in two block-sized scratch buffers; chunked and pipelined like every ring phase.
//
// Cost, n ranks, count c per rank: n - 1 steps, each rank sending, receiving and reducing
// (n - 1) * c elements: bandwidth-optimal, latency linear in n. Accepts every world size and
// count, and out aliasing in's block `rank`.

#include "algorithms/descriptor.hpp"
#include "algorithms/engines/ring_pipeline.hpp"

#include <vector>

namespace cohort::algorithms {

namespace {

void run(const OpContext& ctx, const ReduceScatterArgs& args) {
  if (args.count == 0) return;
  const auto n = static_cast<std::size_t>(ctx.size);
  std::vector<std::size_t> offsets(n), counts(n, args.count);
  for (std::size_t b = 0; b < n; ++b) offsets[b] = b * args.count;
  ring_reduce_scatter(ctx, rank_ring(ctx), static_cast<const std::byte*>(args.in),
                      RingBlocks{offsets, counts}, nullptr, static_cast<std::byte*>(args.out),
                      args.dtype, args.op, 0);
}

}  // namespace

extern const AlgorithmDescriptor reduce_scatter_ring =
    describe<run>(Algorithm::Ring, "Ring reduce-scatter");

}  // namespace cohort::algorithms
