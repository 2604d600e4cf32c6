// Single-copy gather(v), for ranks of one host that may read each other's memory
// (engines/single_copy.hpp).
//
// How it works: every rank but the root exposes its input block; the root copies its own block
// into place, then every other block straight out of its owner's input, in order from the rank
// after it, and says it is done; the others wait for that before they return.
//
// Cost, m bytes: the root copies each block once (the arena path: each non-root writes its block
// into the segment and the root reads it out), two handoffs. For blocks of at most 4 KiB
// (kEagerBytes) the shared-memory gather's eager lines stay faster: their non-roots need not wait
// for the root.

#include "algorithms/engines/single_copy.hpp"
#include "algorithms/descriptor.hpp"
#include "algorithms/engines/own_block.hpp"

namespace cohort::algorithms {
namespace {

void run(const OpContext& ctx, const GatherArgs& args) {
  const std::size_t es = dtype_size(args.dtype);
  SingleCopyOp op(ctx, *ctx.arena());
  if (ctx.rank != args.root) {
    const ExposedBlock mine{args.in, args.counts[static_cast<std::size_t>(ctx.rank)] * es};
    op.expose({&mine, 1});
    op.release_after(args.root);
    return;
  }
  op.expose({});
  OwnBlock::of(args).copy_rest();
  auto* out = static_cast<std::byte*>(args.out);
  for (int k = 1; k < ctx.size; ++k) {
    const auto r = static_cast<std::size_t>((args.root + k) % ctx.size);
    op.read(static_cast<int>(r), 0, out + args.displs[r] * es, args.counts[r] * es);
  }
  op.release();
}

}  // namespace

extern const AlgorithmDescriptor gather_single_copy = describe<run, reading_peers<GatherArgs>>(
    Algorithm::SingleCopy, "Single-copy gather(v): the root copies every block out of its owner");

}  // namespace cohort::algorithms
