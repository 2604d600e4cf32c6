// Shared-memory barrier: every rank announces the next generation and waits to see everyone
// else's (transport/shared_arena.hpp). One cache-line handoff per rank instead of log2(n) rounds
// of messages. Declines without an arena.

#include "algorithms/descriptor.hpp"

namespace cohort::algorithms {

namespace {

void run(const OpContext& ctx, const BarrierArgs&) {
  if (ctx.size == 1) return;
  transport::SharedArena* arena = ctx.arena();
  const std::uint64_t g = arena->next_generation();
  arena->publish(transport::SharedArena::Flag::Arrived, g);
  arena->wait_for_all(transport::SharedArena::Flag::Arrived, g, ctx.deadline, ctx.what);
}

}  // namespace

extern const AlgorithmDescriptor barrier_shared_memory = describe<
    run, alone_or_sharing_host<BarrierArgs>>(
    Algorithm::SharedMemory,
    "Shared-memory barrier: every rank announces the next generation and waits to see everyone");

}  // namespace cohort::algorithms
