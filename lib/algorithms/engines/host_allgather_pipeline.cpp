#include "algorithms/engines/host_allgather_pipeline.hpp"

#include "algorithms/announcement.hpp"
#include "algorithms/engines/host_signals.hpp"
#include "algorithms/engines/ring_pipeline.hpp"
#include "algorithms/engines/single_copy.hpp"

#include <algorithm>
#include <atomic>

namespace cohort::algorithms {
namespace {

std::atomic<std::uint64_t> helped_allgather_count{0};

/// Table entries (SingleCopyOp): every rank's own block; the leader's whole output.
constexpr std::size_t kOwnBlockEntry = 0;
constexpr std::size_t kOutputEntry = 1;

void lead(const OpContext& ctx, const OpContext& local, HostGroups& groups, SingleCopyOp& op,
          const AllgatherArgs& args, const HostShares& shares) {
  const std::size_t es = dtype_size(args.dtype);
  const OpContext leaders = groups.leaders(ctx);
  const std::vector<int>& here = groups.members(groups.host_index());
  const auto mine = static_cast<std::size_t>(groups.host_index());
  auto* out = static_cast<std::byte*>(args.out);
  for (std::size_t c = 0; c < shares.chunks; ++c) {
    op.check_peers();  // a failed helper stops the leader here, not at its release
    // This host's part of chunk c: the pieces of it that the helpers' blocks hold.
    const HostShares::Part part = shares.part(mine, c);
    for (std::size_t i = 1; i < here.size(); ++i) {
      const auto r = static_cast<std::size_t>(here[i]);
      const std::size_t from = std::max(part.offset, args.displs[r]);
      const std::size_t to = std::min(part.offset + part.count, args.displs[r] + args.counts[r]);
      if (from < to)
        op.read_part(static_cast<int>(i), kOwnBlockEntry, args.counts[r] * es,
                     (from - args.displs[r]) * es, out + from * es, (to - from) * es);
    }
    run_chunk_hook(local, c);
    exchange_share_chunk(leaders, shares, out, args.dtype, c);
    for (int h = 1; h < local.size; ++h) signal_chunk(local, h, kDoneStep, c);
  }
}

void help(const OpContext& local, HostGroups& groups, SingleCopyOp& op, const AllgatherArgs& args,
          const HostShares& shares) {
  const std::size_t es = dtype_size(args.dtype);
  const std::vector<int>& here = groups.members(groups.host_index());
  auto* out = static_cast<std::byte*>(args.out);
  // The host's blocks, from their owners, while the leader moves the first chunk.
  for (std::size_t i = 0; i < here.size(); ++i) {
    if (static_cast<int>(i) == local.rank) continue;
    const auto r = static_cast<std::size_t>(here[i]);
    if (args.counts[r] != 0)
      op.read(static_cast<int>(i), kOwnBlockEntry, out + args.displs[r] * es, args.counts[r] * es);
  }
  const int leader[1] = {0};
  const std::size_t hosts = shares.sizes.size();
  for (std::size_t c = 0; c < shares.chunks; ++c) {
    await_chunk(local, groups, leader, kDoneStep, c);
    run_chunk_hook(local, c);
    for (std::size_t h = 0; h < hosts; ++h) {
      if (h == static_cast<std::size_t>(groups.host_index())) continue;
      const HostShares::Part part = shares.part(h, c);
      if (part.count != 0)
        op.read_part(0, kOutputEntry, args.total * es, part.offset * es, out + part.offset * es,
                     part.count * es);
    }
  }
}

}  // namespace

HostShares::Part HostShares::part(std::size_t h, std::size_t c) const {
  const std::size_t begin = std::min(c * chunk_elems, sizes[h]);
  return {starts[h] + begin, std::min(chunk_elems, sizes[h] - begin)};
}

bool hosts_consecutive(const HostGroups& groups) {
  for (int h = 0; h < groups.hosts(); ++h) {
    const std::vector<int>& ranks = groups.members(h);
    for (std::size_t i = 1; i < ranks.size(); ++i)
      if (ranks[i] != ranks[i - 1] + 1) return false;
  }
  return true;
}

HostShares host_shares(const HostGroups& groups, const AllgatherArgs& args,
                       std::size_t chunk_elems) {
  HostShares shares;
  shares.chunk_elems = chunk_elems;
  std::size_t largest = 0;
  for (int h = 0; h < groups.hosts(); ++h) {
    const std::vector<int>& ranks = groups.members(h);
    std::size_t size = 0;
    for (int r : ranks) size += args.counts[static_cast<std::size_t>(r)];
    shares.starts.push_back(args.displs[static_cast<std::size_t>(ranks.front())]);
    shares.sizes.push_back(size);
    largest = std::max(largest, size);
  }
  shares.chunks = chunks_of(largest, chunk_elems);
  return shares;
}

void exchange_share_chunk(const OpContext& leaders, const HostShares& shares, std::byte* out,
                          DType dtype, std::size_t c) {
  const std::size_t hosts = shares.sizes.size();
  std::vector<std::size_t> offsets(hosts), counts(hosts);
  for (std::size_t h = 0; h < hosts; ++h) {
    const HostShares::Part part = shares.part(h, c);
    offsets[h] = part.offset;
    counts[h] = part.count;
  }
  // Every chunk's ring uses the op's first steps again: the transport matches messages of one tag
  // between two ranks in posting order, and every leader runs the same chunks in the same order.
  ring_allgather(leaders, rank_ring(leaders), out, RingBlocks{offsets, counts}, dtype, 0);
}

void allgather_through_helpers(const OpContext& ctx, HostGroups& groups, const AllgatherArgs& args,
                               const HostShares& shares) {
  const OpContext local = groups.local(ctx);
  const std::size_t es = dtype_size(args.dtype);
  const std::size_t bytes = args.total * es;
  const auto me = static_cast<std::size_t>(ctx.rank);
  transport::SharedArena& arena = *local.arena();
  // As the pipelined allreduce's (host_pipeline.cpp): a failed or disagreeing peer is found in
  // every wait and after every copy.
  arena.begin_op(announcement_of(args, bytes, Algorithm::SingleCopy), &describe_announcement);
  SingleCopyOp op(local, arena);
  auto* out = static_cast<std::byte*>(args.out);
  std::vector<ExposedBlock> blocks(groups.is_leader() ? 2 : 1);
  blocks[kOwnBlockEntry] = {out + args.displs[me] * es, args.counts[me] * es};
  if (groups.is_leader()) blocks[kOutputEntry] = {out, bytes};
  op.expose(blocks);
  try {
    if (groups.is_leader())
      lead(ctx, local, groups, op, args, shares);
    else
      help(local, groups, op, args, shares);
  } catch (...) {
    // The SingleCopyOp marks this rank failed as the error leaves; helpers waiting for a
    // leader's done(c) learn it from this (a leader waits for nothing from its helpers).
    if (groups.is_leader()) abandon_signals(local, true);
    throw;
  }
  op.release_after_all();
  helped_allgather_count.fetch_add(1, std::memory_order_relaxed);
}

namespace testing {
std::uint64_t helped_allgathers() noexcept {
  return helped_allgather_count.load(std::memory_order_relaxed);
}
}  // namespace testing

}  // namespace cohort::algorithms
