// Shared-memory barrier: every rank announces the next generation and waits to see everyone
// else's (transport/shared_arena.hpp). One cache-line handoff per rank instead of log2(n) rounds
// of messages. Declines without an arena.

#include "algorithms/implementations.hpp"

namespace cohort::algorithms {

bool barrier_shared_memory(const OpContext& ctx) {
  if (ctx.size == 1) return true;
  transport::SharedArena* arena = ctx.arena();
  if (arena == nullptr) return false;
  const std::uint64_t g = arena->next_generation();
  arena->publish(transport::SharedArena::Flag::Arrived, g);
  arena->wait_for_all(transport::SharedArena::Flag::Arrived, g, ctx.deadline, ctx.what);
  return true;
}

}  // namespace cohort::algorithms
