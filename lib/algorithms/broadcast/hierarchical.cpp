// Hierarchical broadcast, for communicators spanning several hosts with several ranks on some:
// the root's host gets the data through its shared arena (the root broadcasting to its host),
// the leaders (one per host, the root's host's leader holding the data by then) broadcast it
// across hosts, and every other host's leader broadcasts it to its host through its arena. The
// network carries the vector to each host once, instead of to each rank.
//
// Declines unless HostGroups (host_groups.hpp) finds two or more hosts, some with two or more
// ranks, each with its arena.

#include "algorithms/descriptor.hpp"
#include "algorithms/dispatch.hpp"
#include "algorithms/host_groups.hpp"

namespace cohort::algorithms {

namespace {

bool accepts(const OpContext& ctx, const BroadcastArgs&) {
  return ctx.size >= 3 && ctx.host_groups != nullptr && ctx.host_groups->get(ctx) != nullptr;
}

void run(const OpContext& ctx, const BroadcastArgs& args) {
  HostGroups& groups = *ctx.host_groups->get(ctx);
  const OpContext local = groups.local(ctx);
  ScratchPool& staging = groups.staging();
  const int root_host = groups.host_of(args.root);
  const bool on_root_host = groups.host_index() == root_host;
  // 1. The root's host (its broadcast copies the root's input into the root's output).
  if (on_root_host)
    run_collective(local, staging,
                   BroadcastArgs{ctx.rank == args.root ? args.in : nullptr, args.out, args.count,
                                 args.dtype, groups.local_index_of(args.root)},
                   Algorithm::Auto);
  // 2. Across hosts, from the root host's leader.
  if (groups.is_leader())
    run_collective(groups.leaders(ctx), staging,
                   BroadcastArgs{on_root_host ? args.out : nullptr, args.out, args.count,
                                 args.dtype, root_host},
                   Algorithm::Auto);
  // 3. Every other host, from its leader.
  if (!on_root_host) broadcast_from_leader(ctx, groups, args.out, args.count, args.dtype);
}

}  // namespace

extern const AlgorithmDescriptor broadcast_hierarchical = describe<run, accepts>(
    Algorithm::Hierarchical,
    "to the root's host through its arena, across hosts among leaders, then each host's arena");

}  // namespace cohort::algorithms
