// Hierarchical reduce, for communicators spanning several hosts with several ranks on some: the
// ranks of a host reduce into their leader through their host's shared arena, the leaders (one
// per host) reduce to the root's host's leader over the network, and that leader hands the
// result to the root when the root does not lead its host. The network carries each host's
// vector once, instead of each rank's.
//
// The vector goes in chunks (1 MiB, engines/host_signals.hpp), the same on every host, so the
// leaders run the same reduces whichever schedule their hosts run. Above one chunk, on a host
// whose arena has single copy, the phases of different chunks overlap: the host's other ranks
// fold the next chunks (and a root among them copies an earlier chunk's result out) while the
// leader moves chunk c (engines/host_pipeline.hpp). Elsewhere each chunk's phases run one after the
// other.
//
// Declines unless HostGroups (host_groups.hpp) finds two or more hosts, some with two or more
// ranks, each with its arena. (Avg arrives as Sum, normalise.hpp: divided once at the root.)

#include "algorithms/descriptor.hpp"
#include "algorithms/dispatch.hpp"
#include "algorithms/engines/host_pipeline.hpp"
#include "algorithms/engines/host_signals.hpp"
#include "algorithms/engines/point_to_point.hpp"
#include "algorithms/host_groups.hpp"

#include <algorithm>

namespace cohort::algorithms {

namespace {

bool accepts(const OpContext& ctx, const ReduceArgs&) {
  return hierarchy_of(ctx) != nullptr;
}

/// The phases, one after the other, for elements [offset, offset + count).
void run_phases(const OpContext& ctx, HostGroups& groups, const ReduceArgs& args,
                std::size_t offset, std::size_t count) {
  const std::size_t es = dtype_size(args.dtype);
  const std::size_t at = offset * es;
  const auto* in = static_cast<const std::byte*>(args.in) + at;
  auto* out = args.out != nullptr ? static_cast<std::byte*>(args.out) + at : nullptr;
  const OpContext local = groups.local(ctx);
  const int root_host = groups.host_of(args.root);
  const bool root_here = groups.host_index() == root_host;
  const int root_local = root_here ? groups.local_index_of(args.root) : -1;
  // The host's reduction on its leader: the root's output where the root leads, else the
  // leader's buffer; a host of one leader reduces its input as it is.
  const std::byte* host_result = in;
  std::byte* landing = nullptr;
  if (groups.is_leader()) landing = root_local == 0 ? out : groups.buffers().get(count * es, 0);
  if (groups.local_size() > 1) {
    run_collective(local, groups.staging(), ReduceArgs{in, landing, count, args.dtype, args.op, 0},
                   Algorithm::Auto);
    host_result = landing;
  }
  // Across hosts, to the root's host's leader (in place there when its host reduced into it).
  if (groups.is_leader())
    run_collective(groups.leaders(ctx), groups.staging(),
                   ReduceArgs{host_result, root_here ? landing : nullptr, count, args.dtype,
                              args.op, root_host},
                   Algorithm::Auto);
  // The root's host's leader hands the result to a root that does not lead.
  if (root_local > 0) {
    transport::Request request;
    if (groups.is_leader())
      request = post_send(local, root_local, landing, count * es, kResultStep);
    else if (local.rank == root_local)
      request = post_recv(local, 0, out, count * es, kResultStep);
    wait_request(local, request);
  }
}

void run(const OpContext& ctx, const ReduceArgs& args) {
  HostGroups& groups = *ctx.host_groups->get(ctx);
  const std::size_t chunk = hierarchical_chunk_elements(args.dtype);
  if (args.count > chunk && host_pipelines(ctx, groups) &&
      reduce_through_helpers(ctx, groups, args, chunk))
    return;
  for (std::size_t offset = 0; offset < args.count; offset += chunk)
    run_phases(ctx, groups, args, offset, std::min(chunk, args.count - offset));
}

}  // namespace

extern const AlgorithmDescriptor reduce_hierarchical = describe<run, accepts>(
    Algorithm::Hierarchical,
    "reduce inside each host through its arena, reduce across hosts, then to the root");

}  // namespace cohort::algorithms
