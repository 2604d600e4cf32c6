// Shared-memory reduce, for communicators whose ranks all live on one host: every rank takes part
// in shared_memory_reduction (shared_memory_reduction.cpp describes the schemes), and only the
// root collects the result; the others are done once their shares are reduced.
//
// Cost per rank, m bytes: input read once; the root writes the output once. Unlike a tree, no
// rank reduces more than its 1/n share of a large vector. Declines only without an arena.

#include "algorithms/descriptor.hpp"
#include "algorithms/engines/shared_memory_reduction.hpp"
#include "core/copy_bytes.hpp"

namespace cohort::algorithms {

namespace {

void run(const OpContext& ctx, const ReduceArgs& args) {
  if (ctx.size == 1) {
    if (args.out != args.in) copy_bytes(args.out, args.in, args.count * dtype_size(args.dtype));
    return;
  }
  shared_memory_reduction(ctx, args.in, ctx.rank == args.root ? args.out : nullptr, args.count,
                          args.dtype, args.op);
}

}  // namespace

extern const AlgorithmDescriptor reduce_shared_memory =
    describe<run, alone_or_sharing_host<ReduceArgs>>(
        Algorithm::SharedMemory,
        "Shared-memory reduce, for communicators whose ranks all live on one host: every rank "
        "takes part");

}  // namespace cohort::algorithms
