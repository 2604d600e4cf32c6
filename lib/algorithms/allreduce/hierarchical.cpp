// Hierarchical allreduce, for communicators spanning several hosts with several ranks on some:
// the ranks of a host reduce into their leader through their host's shared arena, the leaders
// (one per host) allreduce among themselves over the network, and each leader broadcasts the
// result to its host through the arena again. Each phase is an ordinary op on a group of the
// communicator (host_groups.hpp), chosen by the same selection table: shared-memory reduce and
// broadcast inside a host, ring / Rabenseifner / recursive doubling between hosts.
//
// Cost, h hosts of k ranks, m bytes: the network carries what an allreduce of h ranks carries
// (2(h - 1)/h * m per leader for large m) instead of one of h * k ranks, and a host's other
// ranks add two arena passes (memory bandwidth, far above a network link's). It gives up on the
// bandwidth of the leaders' peers inside a host (NCCL's variant has every local rank drive its
// own slice across hosts), which only matters when one rank cannot fill the link.
//
// Declines unless the ranks span two or more hosts, some host has two or more, and every such
// host got its shared arena (HostGroups decides, alike on every rank), and for Avg (the phases
// would each divide by their own group's size).

#include "algorithms/descriptor.hpp"
#include "algorithms/dispatch.hpp"
#include "algorithms/host_groups.hpp"

namespace cohort::algorithms {

namespace {

bool accepts(const OpContext& ctx, const AllreduceArgs& args) {
  if (args.op == ReduceOp::Avg || ctx.size < 3 || ctx.host_groups == nullptr) return false;
  return ctx.host_groups->get(ctx) != nullptr;
}

void run(const OpContext& ctx, const AllreduceArgs& args) {
  HostGroups& groups = *ctx.host_groups->get(ctx);
  const OpContext local = groups.local(ctx);
  ScratchPool& staging = groups.staging();
  // 1. Reduce into the leader's output (a host of one just copies).
  run_collective(local, staging,
                 ReduceArgs{args.in, groups.is_leader() ? args.out : nullptr, args.count,
                            args.dtype, args.op, 0},
                 Algorithm::Auto);
  // 2. The leaders combine their hosts' results.
  if (groups.is_leader())
    run_collective(groups.leaders(ctx), staging,
                   AllreduceArgs{args.out, args.out, args.count, args.dtype, args.op},
                   Algorithm::Auto);
  // 3. Every rank of a host gets its leader's result.
  broadcast_from_leader(ctx, groups, args.out, args.count, args.dtype);
}

}  // namespace

extern const AlgorithmDescriptor allreduce_hierarchical = describe<run, accepts>(
    Algorithm::Hierarchical,
    "reduce inside each host through its arena, allreduce across hosts, broadcast back");

}  // namespace cohort::algorithms
