// Hierarchical barrier, for communicators spanning several hosts with several ranks on some:
// each host's ranks meet in their shared arena, the leaders (one per host) meet across hosts,
// and each host meets again so that no rank leaves before every host has arrived. Messages cross
// the network between h leaders only (log2 h dissemination rounds), not between all ranks.
//
// Declines unless HostGroups (host_groups.hpp) finds two or more hosts, some with two or more
// ranks, each with its arena.

#include "algorithms/descriptor.hpp"
#include "algorithms/dispatch.hpp"
#include "algorithms/host_groups.hpp"

namespace cohort::algorithms {

namespace {

bool accepts(const OpContext& ctx, const BarrierArgs&) {
  return hierarchy_of(ctx) != nullptr;
}

void run(const OpContext& ctx, const BarrierArgs&) {
  HostGroups& groups = *ctx.host_groups->get(ctx);
  const OpContext local = groups.local(ctx);
  ScratchPool& staging = groups.staging();
  run_collective(local, staging, BarrierArgs{}, Algorithm::Auto);
  if (groups.is_leader())
    run_collective(groups.leaders(ctx), staging, BarrierArgs{}, Algorithm::Auto);
  run_collective(local, staging, BarrierArgs{}, Algorithm::Auto);
}

}  // namespace

extern const AlgorithmDescriptor barrier_hierarchical = describe<run, accepts>(
    Algorithm::Hierarchical,
    "each host through its arena, then the leaders across hosts, then each host again");

}  // namespace cohort::algorithms
