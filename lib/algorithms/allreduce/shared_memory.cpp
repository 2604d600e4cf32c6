// Shared-memory allreduce, for communicators whose ranks all live on one host: every rank takes
// part in shared_memory_reduction (shared_memory_reduction.cpp describes the schemes) and
// collects the whole result.
//
// Cost per rank, m bytes: input read once, output written once, the arena touched while in
// cache; one handoff for vectors up to 16 KiB, two per 256 KiB piece above. Accepts every world
// size, dtype and count; declines only without an arena (ranks on several hosts, or
// COHORT_SHARED_MEMORY=off) on more than one rank.

#include "algorithms/descriptor.hpp"
#include "algorithms/engines/shared_memory_reduction.hpp"
#include "core/copy_bytes.hpp"

namespace cohort::algorithms {

namespace {

void run(const OpContext& ctx, const AllreduceArgs& args) {
  if (ctx.size == 1) {
    if (args.out != args.in) copy_bytes(args.out, args.in, args.count * dtype_size(args.dtype));
    return;
  }
  shared_memory_reduction(ctx, args.in, args.out, args.count, args.dtype, args.op);
}

}  // namespace

extern const AlgorithmDescriptor allreduce_shared_memory =
    describe<run, alone_or_sharing_host<AllreduceArgs>>(
        Algorithm::SharedMemory,
        "Shared-memory allreduce, for communicators whose ranks all live on one host: every rank "
        "takes");

}  // namespace cohort::algorithms
