// Hierarchical broadcast, for communicators spanning several hosts with several ranks on some:
// the root's host gets the data through its shared arena (the root broadcasting to its host),
// the leaders (one per host, the root's host's leader holding the data by then) broadcast it
// across hosts, and every other host's leader broadcasts it to its host through its arena. The
// network carries the vector to each host once, instead of to each rank.
//
// Above one chunk (1 MiB, engines/host_signals.hpp) it goes a chunk at a time: a host's
// broadcast of chunk c then runs while the next chunks arrive (the sender's messages wait in the
// receiving kernel's socket buffers meanwhile), where the whole vector would have to arrive first.
// Measured on a 4 Gbit/s link, 2 hosts x 2 ranks, root 0: 64 MiB took 140 ms in chunks against
// 149-158 whole, 256 MiB 563-595 against 624-636, one rank per host 140-146 and 562-614
// (bench/PERFORMANCE-LOG.md, "Hierarchical broadcast in chunks"; not measured over RDMA, where
// nothing buffers the next chunks). A schedule like the allreduce's, the leader's other ranks
// copying each chunk out of its output while it receives the next, showed no consistent gain
// in single runs there and was not kept.
//
// Declines unless HostGroups (host_groups.hpp) finds two or more hosts, some with two or more
// ranks, each with its arena.

#include "algorithms/descriptor.hpp"
#include "algorithms/dispatch.hpp"
#include "algorithms/engines/host_signals.hpp"
#include "algorithms/host_groups.hpp"

#include <algorithm>

namespace cohort::algorithms {

namespace {

bool accepts(const OpContext& ctx, const BroadcastArgs&) {
  return hierarchy_of(ctx) != nullptr;
}

/// The three phases, one after the other, for elements [offset, offset + count).
void run_phases(const OpContext& ctx, HostGroups& groups, const BroadcastArgs& args,
                std::size_t offset, std::size_t count) {
  const std::size_t at = offset * dtype_size(args.dtype);
  const void* in = args.in != nullptr ? static_cast<const std::byte*>(args.in) + at : nullptr;
  auto* out = static_cast<std::byte*>(args.out) + at;
  const OpContext local = groups.local(ctx);
  ScratchPool& staging = groups.staging();
  const int root_host = groups.host_of(args.root);
  const bool on_root_host = groups.host_index() == root_host;
  // 1. The root's host (its broadcast copies the root's input into the root's output).
  if (on_root_host)
    run_collective(local, staging,
                   BroadcastArgs{ctx.rank == args.root ? in : nullptr, out, count, args.dtype,
                                 groups.local_index_of(args.root)},
                   Algorithm::Auto);
  // 2. Across hosts, from the root host's leader.
  if (groups.is_leader())
    run_collective(groups.leaders(ctx), staging,
                   BroadcastArgs{on_root_host ? out : nullptr, out, count, args.dtype, root_host},
                   Algorithm::Auto);
  // 3. Every other host, from its leader.
  if (!on_root_host) broadcast_from_leader(ctx, groups, out, count, args.dtype);
}

void run(const OpContext& ctx, const BroadcastArgs& args) {
  HostGroups& groups = *ctx.host_groups->get(ctx);
  const std::size_t chunk = hierarchical_chunk_elements(args.dtype);
  for (std::size_t offset = 0; offset < args.count; offset += chunk)
    run_phases(ctx, groups, args, offset, std::min(chunk, args.count - offset));
}

}  // namespace

extern const AlgorithmDescriptor broadcast_hierarchical = describe<run, accepts>(
    Algorithm::Hierarchical,
    "to the root's host through its arena, across hosts among leaders, then each host's arena");

}  // namespace cohort::algorithms
