// Hierarchical allgather(v), for communicators spanning several hosts with several ranks on some:
// each host's ranks gather their blocks into their leader through the host's shared arena, the
// leaders (one per host) allgather their hosts' blocks across hosts, and each leader broadcasts
// the whole result to its host through the arena. The network carries every host's blocks to
// each other host once, instead of every rank's blocks to every rank.
//
// When each host's ranks are consecutive (the usual launch: cohort-run, torchrun and mpirun hand
// out ranks host by host) a host's blocks are one run of the output and the leaders exchange them
// in place. Otherwise the leaders pack their hosts' blocks host by host into a buffer, exchange
// that, and unpack it into rank order: two copies at memory speed, on the leaders only.
//
// With consecutive hosts and a share above one chunk (1 MiB, engines/host_signals.hpp), the
// leaders exchange the shares a chunk at a time, and on a host whose arena has single copy the
// host's copies overlap the exchange: the leader reads its host's blocks chunk by chunk, and its
// other ranks take the host's blocks from their owners and the other hosts' parts of each chunk
// out of the leader's output while it moves the next (engines/host_allgather_pipeline.hpp).
//
// Declines unless HostGroups (host_groups.hpp) finds two or more hosts, some with two or more
// ranks, each with its arena; and unless the blocks lie packed in rank order (as the public
// allgather and allgatherv lay them out), so that broadcasting the whole output writes nothing
// outside them.

#include "algorithms/descriptor.hpp"
#include "algorithms/dispatch.hpp"
#include "algorithms/engines/host_allgather_pipeline.hpp"
#include "algorithms/engines/host_signals.hpp"
#include "algorithms/host_groups.hpp"
#include "core/copy_bytes.hpp"

namespace cohort::algorithms {

namespace {

bool packed_in_rank_order(const AllgatherArgs& args) {
  std::size_t next = 0;
  for (std::size_t r = 0; r < args.counts.size(); ++r) {
    if (args.displs[r] != next) return false;
    next += args.counts[r];
  }
  return next == args.total;
}

bool accepts(const OpContext& ctx, const AllgatherArgs& args) {
  return packed_in_rank_order(args) && hierarchy_of(ctx) != nullptr;
}

/// Phase 2 on a leader: every host's blocks reach every leader's out.
void exchange_between_hosts(const OpContext& ctx, HostGroups& groups, const AllgatherArgs& args) {
  const int hosts = groups.hosts();
  const std::size_t es = dtype_size(args.dtype);
  auto* out = static_cast<std::byte*>(args.out);
  const bool in_place = hosts_consecutive(groups);

  // Each host's share: its ranks' blocks, one after another in rank order.
  AllgatherArgs between{nullptr, nullptr, {}, {}, args.total, args.dtype, true};
  std::size_t packed_at = 0;
  for (int h = 0; h < hosts; ++h) {
    std::size_t share = 0;
    for (int r : groups.members(h)) share += args.counts[static_cast<std::size_t>(r)];
    between.counts.push_back(share);
    between.displs.push_back(
        in_place ? args.displs[static_cast<std::size_t>(groups.members(h).front())] : packed_at);
    packed_at += share;
  }
  std::byte* exchanged = in_place ? out : groups.buffers().get(args.total * es);
  const auto mine = static_cast<std::size_t>(groups.host_index());
  if (!in_place) {
    std::size_t at = between.displs[mine];
    for (int r : groups.members(groups.host_index())) {
      const auto rr = static_cast<std::size_t>(r);
      if (args.counts[rr] != 0)
        copy_bytes(exchanged + at * es, out + args.displs[rr] * es, args.counts[rr] * es);
      at += args.counts[rr];
    }
  }
  between.in = exchanged + between.displs[mine] * es;
  between.out = exchanged;
  run_collective(groups.leaders(ctx), groups.staging(), between, Algorithm::Auto);
  if (in_place) return;
  for (int h = 0; h < hosts; ++h) {
    if (h == groups.host_index()) continue;  // already in place
    std::size_t at = between.displs[static_cast<std::size_t>(h)];
    for (int r : groups.members(h)) {
      const auto rr = static_cast<std::size_t>(r);
      if (args.counts[rr] != 0)
        copy_bytes(out + args.displs[rr] * es, exchanged + at * es, args.counts[rr] * es);
      at += args.counts[rr];
    }
  }
}

/// Phase 1: the host's blocks into its leader's out, each at its own place (normalised: this
/// rank's block is in its out already, which is where it is gathered from).
void gather_into_leader(const OpContext& ctx, HostGroups& groups, const AllgatherArgs& args) {
  const std::size_t es = dtype_size(args.dtype);
  auto* out = static_cast<std::byte*>(args.out);
  GatherArgs gather{out + args.displs[static_cast<std::size_t>(ctx.rank)] * es,
                    groups.is_leader() ? args.out : nullptr,
                    {},
                    {},
                    0,
                    args.dtype,
                    0,
                    true};
  for (int r : groups.members(groups.host_index())) {
    gather.counts.push_back(args.counts[static_cast<std::size_t>(r)]);
    gather.displs.push_back(args.displs[static_cast<std::size_t>(r)]);
    gather.total += args.counts[static_cast<std::size_t>(r)];
  }
  run_collective(groups.local(ctx), groups.staging(), gather, Algorithm::Auto);
}

void run(const OpContext& ctx, const AllgatherArgs& args) {
  HostGroups& groups = *ctx.host_groups->get(ctx);
  // Shares above one chunk, where each host's blocks are one run of the output, go in chunks
  // (engines/host_allgather_pipeline.hpp); the verdict is the same on every rank.
  if (hosts_consecutive(groups)) {
    const HostShares shares = host_shares(groups, args, hierarchical_chunk_elements(args.dtype));
    if (shares.chunks > 1) {
      if (host_pipelines(ctx, groups)) {
        allgather_through_helpers(ctx, groups, args, shares);
        return;
      }
      gather_into_leader(ctx, groups, args);
      if (groups.is_leader()) {
        const OpContext leaders = groups.leaders(ctx);
        for (std::size_t c = 0; c < shares.chunks; ++c)
          exchange_share_chunk(leaders, shares, static_cast<std::byte*>(args.out), args.dtype, c);
      }
      broadcast_from_leader(ctx, groups, args.out, args.total, args.dtype);
      return;
    }
  }
  // 1. The host's blocks into its leader.
  gather_into_leader(ctx, groups, args);
  // 2. Across hosts, among the leaders.
  if (groups.is_leader()) exchange_between_hosts(ctx, groups, args);
  // 3. The whole result to the host's other ranks.
  broadcast_from_leader(ctx, groups, args.out, args.total, args.dtype);
}

}  // namespace

extern const AlgorithmDescriptor allgather_hierarchical = describe<run, accepts>(
    Algorithm::Hierarchical,
    "gather inside each host through its arena, allgather across hosts, broadcast back");

}  // namespace cohort::algorithms
