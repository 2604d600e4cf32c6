// Single-copy scatter(v), for ranks of one host that may read each other's memory
// (engines/single_copy.hpp).
//
// How it works: the root exposes one entry per rank (where that rank's block is in its input);
// every other rank copies its block straight into its output and says so; the root copies its
// own block meanwhile, then waits until every rank is done reading.
//
// Cost, m bytes: each non-root copies its block once (the arena path: the root writes every
// block into the segment and each rank reads its own out), two handoffs; the copies run on all
// ranks at once instead of the root writing all of them.

#include "algorithms/engines/single_copy.hpp"
#include "algorithms/descriptor.hpp"
#include "algorithms/engines/own_block.hpp"

namespace cohort::algorithms {
namespace {

void run(const OpContext& ctx, const ScatterArgs& args) {
  const std::size_t es = dtype_size(args.dtype);
  const auto me = static_cast<std::size_t>(ctx.rank);
  SingleCopyOp op(ctx, *ctx.arena());
  if (ctx.rank == args.root) {
    op.expose_layout(args.in, args.counts, args.displs, es);
    OwnBlock::of(args).copy_rest();
    op.release_after_all();
    return;
  }
  op.expose({});
  op.read(args.root, me, args.out, args.counts[me] * es);
  op.release();
}

}  // namespace

extern const AlgorithmDescriptor scatter_single_copy = describe<run, reading_peers<ScatterArgs>>(
    Algorithm::SingleCopy, "Single-copy scatter(v): each rank copies its block out of the root's");

}  // namespace cohort::algorithms
