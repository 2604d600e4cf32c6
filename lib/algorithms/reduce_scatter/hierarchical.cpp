// Hierarchical reduce_scatter, for communicators spanning several hosts with several ranks on
// some: each host's ranks reduce their whole inputs into their leader through the host's shared
// arena, the leaders reduce-scatter across hosts so that each gets the blocks of its own host's
// ranks, and each leader scatters those to its ranks through the arena. The network carries what
// a reduce_scatter among the hosts carries instead of one among all ranks.
//
// The leaders' reduce_scatter gives every host an equal share, so a host's share is the blocks
// of `largest` ranks (the most any host has), its own ranks' first, in rank order; the slots a
// smaller host lacks are zeros that ride along and are dropped. When each host's ranks are
// consecutive and every host has as many, the reduced input already is in that order and the
// leaders reduce-scatter it where it lies; otherwise a leader first lays its blocks out so.
//
// When hosts are in that order and a share is above one chunk (1 MiB, engines/host_signals.hpp),
// the leaders reduce-scatter the same elements of every share a chunk at a time, and on a host
// whose arena has single copy the host's other ranks fold the next chunk and copy their blocks
// of the last one out while the leader moves this one (engines/host_pipeline.hpp).
//
// Declines unless HostGroups (host_groups.hpp) finds two or more hosts, some with two or more
// ranks, each with its arena. (Avg arrives as Sum, normalise.hpp: divided once at the end.)

#include "algorithms/descriptor.hpp"
#include "algorithms/dispatch.hpp"
#include "algorithms/engines/host_pipeline.hpp"
#include "algorithms/engines/host_signals.hpp"
#include "algorithms/host_groups.hpp"
#include "core/copy_bytes.hpp"

#include <cstring>

namespace cohort::algorithms {

namespace {

bool accepts(const OpContext& ctx, const ReduceScatterArgs&) {
  return hierarchy_of(ctx) != nullptr;
}

/// Whether rank r's block is already where the leaders' reduce_scatter wants it: host h's ranks
/// are h * largest ... h * largest + largest - 1.
bool already_in_share_order(const HostGroups& groups) {
  for (int h = 0; h < groups.hosts(); ++h) {
    const std::vector<int>& members = groups.members(h);
    if (static_cast<int>(members.size()) != groups.largest_host()) return false;
    for (std::size_t i = 0; i < members.size(); ++i)
      if (members[i] != h * groups.largest_host() + static_cast<int>(i)) return false;
  }
  return true;
}

/// Phase 3: each rank of the host gets its block of the host's reduced share (`mine`, on the
/// leader) through the arena.
void scatter_from_leader(const OpContext& ctx, HostGroups& groups, const ReduceScatterArgs& args,
                         const std::byte* mine) {
  const auto local_size = static_cast<std::size_t>(groups.local_size());
  ScatterArgs scatter{groups.is_leader() ? mine : nullptr,
                      args.out,
                      RankSizes(local_size, args.count),
                      {},
                      args.count * local_size,
                      args.dtype,
                      0,
                      false};
  for (std::size_t i = 0; i < local_size; ++i) scatter.displs.push_back(i * args.count);
  run_collective(groups.local(ctx), groups.staging(), scatter, Algorithm::Auto);
}

/// The three phases on the whole vector.
void run_phases(const OpContext& ctx, HostGroups& groups, const ReduceScatterArgs& args,
                bool in_order) {
  const OpContext local = groups.local(ctx);
  const std::size_t es = dtype_size(args.dtype);
  const std::size_t block = args.count * es;
  const auto slots = static_cast<std::size_t>(groups.largest_host());
  const auto hosts = static_cast<std::size_t>(groups.hosts());
  const std::size_t whole = args.count * static_cast<std::size_t>(ctx.size);

  // The leader's buffers: the host's reduced input, the same laid out share by share (unless it
  // already is), and the host's reduced share.
  std::byte* reduced = nullptr;
  std::byte* shares = nullptr;
  std::byte* mine = nullptr;
  if (groups.is_leader()) {
    ScratchPool& buffers = groups.buffers();
    reduced = buffers.get(whole * es, 0);
    shares = in_order ? reduced : buffers.get(hosts * slots * block, 1);
    mine = buffers.get(slots * block, 2);
  }
  // 1. The host's inputs, reduced into its leader.
  run_collective(local, groups.staging(),
                 ReduceArgs{args.in, reduced, whole, args.dtype, args.op, 0}, Algorithm::Auto);
  // 2. Across hosts: each leader gets the reduction of its host's ranks' blocks.
  if (groups.is_leader()) {
    if (!in_order && block != 0) {
      for (std::size_t h = 0; h < hosts; ++h) {
        const std::vector<int>& members = groups.members(static_cast<int>(h));
        for (std::size_t i = 0; i < members.size(); ++i)
          copy_bytes(shares + (h * slots + i) * block,
                     reduced + static_cast<std::size_t>(members[i]) * block, block);
        // Padding slots: any value would do (dropped after), zeros keep the sums finite.
        if (members.size() < slots)
          std::memset(shares + (h * slots + members.size()) * block, 0,
                      (slots - members.size()) * block);
      }
    }
    run_collective(groups.leaders(ctx), groups.staging(),
                   ReduceScatterArgs{shares, mine, slots * args.count, args.dtype, args.op},
                   Algorithm::Auto);
  }
  // 3. Each rank of the host gets its block from the leader.
  scatter_from_leader(ctx, groups, args, mine);
}

/// In order, shares above one chunk, on a host that cannot run the pipelined schedule: the
/// host's inputs reduced into its leader whole, the leaders' reduce_scatters chunk by chunk (the
/// same chunks every host's leader runs, engines/host_pipeline.hpp), each chunk's pieces packed
/// from the reduced input first, and the share scattered back whole.
void run_chunked_phases(const OpContext& ctx, HostGroups& groups, const ReduceScatterArgs& args,
                        std::size_t chunk_elems) {
  const std::size_t es = dtype_size(args.dtype);
  const auto hosts = static_cast<std::size_t>(groups.hosts());
  const std::size_t share = args.count * static_cast<std::size_t>(groups.local_size());
  const std::size_t whole = args.count * static_cast<std::size_t>(ctx.size);
  std::byte* reduced = nullptr;
  std::byte* pieces = nullptr;
  std::byte* mine = nullptr;
  if (groups.is_leader()) {
    ScratchPool& buffers = groups.buffers();
    reduced = buffers.get(whole * es, 0);
    pieces = buffers.get(hosts * chunk_elems * es, 1);
    mine = buffers.get(share * es, 2);
  }
  run_collective(groups.local(ctx), groups.staging(),
                 ReduceArgs{args.in, reduced, whole, args.dtype, args.op, 0}, Algorithm::Auto);
  if (groups.is_leader()) {
    const OpContext leaders = groups.leaders(ctx);
    for (std::size_t c = 0; c < chunks_of(share, chunk_elems); ++c) {
      const Chunk chunk = chunk_at(c, chunk_elems, share);
      for (std::size_t h = 0; h < hosts; ++h)
        copy_bytes(pieces + h * chunk.count * es, reduced + (h * share + chunk.offset) * es,
                   chunk.count * es);
      run_collective(
          leaders, groups.staging(),
          ReduceScatterArgs{pieces, mine + chunk.offset * es, chunk.count, args.dtype, args.op},
          Algorithm::Auto);
    }
  }
  scatter_from_leader(ctx, groups, args, mine);
}

void run(const OpContext& ctx, const ReduceScatterArgs& args) {
  HostGroups& groups = *ctx.host_groups->get(ctx);
  const bool in_order = already_in_share_order(groups);
  const std::size_t chunk = hierarchical_chunk_elements(args.dtype);
  if (in_order && args.count * static_cast<std::size_t>(groups.local_size()) > chunk) {
    if (host_pipelines(ctx, groups) && reduce_scatter_through_helpers(ctx, groups, args, chunk))
      return;
    run_chunked_phases(ctx, groups, args, chunk);
    return;
  }
  run_phases(ctx, groups, args, in_order);
}

}  // namespace

extern const AlgorithmDescriptor reduce_scatter_hierarchical = describe<run, accepts>(
    Algorithm::Hierarchical,
    "reduce inside each host through its arena, reduce_scatter across hosts, scatter back");

}  // namespace cohort::algorithms
