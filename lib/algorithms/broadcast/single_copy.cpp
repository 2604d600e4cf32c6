// Single-copy broadcast, for ranks of one host that may read each other's memory
// (engines/single_copy.hpp).
//
// How it works: the root exposes its data; every other rank copies it straight into its output
// and says so; an out-of-place root copies its input into its own output meanwhile, then waits
// until every rank is done reading, since its caller may change the input once it returns.
//
// Cost, m bytes: each non-root copies m once (the arena path: the root writes m into the segment
// and every rank reads it out), two handoffs, and the root waits for the slowest reader.

#include "algorithms/engines/single_copy.hpp"
#include "algorithms/broadcast/root_input.hpp"
#include "algorithms/descriptor.hpp"

namespace cohort::algorithms {
namespace {

void run(const OpContext& ctx, const BroadcastArgs& args) {
  const std::size_t bytes = args.count * dtype_size(args.dtype);
  SingleCopyOp op(ctx, *ctx.arena());
  if (ctx.rank == args.root) {
    const ExposedBlock data{root_data(args), bytes};
    op.expose({&data, 1});
    copy_root_input(args);
    op.release_after_all();
    return;
  }
  op.expose({});
  op.read(args.root, 0, args.out, bytes);
  op.release();
}

}  // namespace

extern const AlgorithmDescriptor broadcast_single_copy =
    describe<run, reading_peers<BroadcastArgs>>(
        Algorithm::SingleCopy,
        "Single-copy broadcast: every rank copies the root's vector out of its buffer");

}  // namespace cohort::algorithms
