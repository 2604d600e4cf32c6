// Hierarchical allreduce, for communicators spanning several hosts with several ranks on some:
// the ranks of a host reduce into their leader through their host's shared arena, the leaders
// (one per host) allreduce among themselves over the network, and each leader broadcasts the
// result to its host through the arena again. Each phase is an ordinary op on a group of the
// communicator (host_groups.hpp), chosen by the same selection table: shared-memory reduce and
// broadcast inside a host, ring / Rabenseifner / recursive doubling between hosts.
//
// Above one chunk (1 MiB, engines/host_signals.hpp), the vector is cut into chunks that go through
// the phases one after another, and on a host whose arena has single copy the phases of different
// chunks overlap: the host's other ranks fold chunk c + 1 and copy chunk c - 1's result out while
// the leader moves chunk c between hosts (engines/host_pipeline.hpp). Every host cuts the same
// chunks, so the leaders run the same allreduces whichever schedule their hosts run.
//
// Cost, h hosts of k ranks, m bytes: the network carries what an allreduce of h ranks carries
// (2(h - 1)/h * m per leader for large m) instead of one of h * k ranks, and a host's other
// ranks add two arena passes (memory bandwidth, far above a network link's), which pipelining
// hides under the link's time. It gives up on the
// bandwidth of the leaders' peers inside a host (NCCL's variant has every local rank drive its
// own slice across hosts), which only matters when one rank cannot fill the link.
//
// Declines unless the ranks span two or more hosts, some host has two or more, and every such
// host got its shared arena (HostGroups decides, alike on every rank), and for Avg (the phases
// would each divide by their own group's size).

#include "algorithms/descriptor.hpp"
#include "algorithms/dispatch.hpp"
#include "algorithms/engines/host_pipeline.hpp"
#include "algorithms/engines/host_signals.hpp"
#include "algorithms/host_groups.hpp"

#include <algorithm>

namespace cohort::algorithms {

namespace {

bool accepts(const OpContext& ctx, const AllreduceArgs& args) {
  return args.op != ReduceOp::Avg && hierarchy_of(ctx) != nullptr;
}

/// The three phases, one after the other, for elements [offset, offset + count).
void run_phases(const OpContext& ctx, HostGroups& groups, const AllreduceArgs& args,
                std::size_t offset, std::size_t count) {
  const std::size_t at = offset * dtype_size(args.dtype);
  const auto* in = static_cast<const std::byte*>(args.in) + at;
  auto* out = static_cast<std::byte*>(args.out) + at;
  ScratchPool& staging = groups.staging();
  // 1. Reduce into the leader's output (a host of one just copies).
  run_collective(groups.local(ctx), staging,
                 ReduceArgs{in, groups.is_leader() ? out : nullptr, count, args.dtype, args.op, 0},
                 Algorithm::Auto);
  // 2. The leaders combine their hosts' results.
  if (groups.is_leader())
    run_collective(groups.leaders(ctx), staging,
                   AllreduceArgs{out, out, count, args.dtype, args.op}, Algorithm::Auto);
  // 3. Every rank of a host gets its leader's result.
  broadcast_from_leader(ctx, groups, out, count, args.dtype);
}

void run(const OpContext& ctx, const AllreduceArgs& args) {
  HostGroups& groups = *ctx.host_groups->get(ctx);
  const std::size_t chunk = hierarchical_chunk_elements(args.dtype);
  if (args.count > chunk && host_pipelines(ctx, groups) &&
      allreduce_through_helpers(ctx, groups, args, chunk))
    return;
  for (std::size_t offset = 0; offset < args.count; offset += chunk)
    run_phases(ctx, groups, args, offset, std::min(chunk, args.count - offset));
}

}  // namespace

extern const AlgorithmDescriptor allreduce_hierarchical = describe<run, accepts>(
    Algorithm::Hierarchical,
    "reduce inside each host through its arena, allreduce across hosts, broadcast back");

}  // namespace cohort::algorithms
