#include "algorithms/engines/host_pipeline.hpp"

#include "algorithms/announcement.hpp"
#include "algorithms/dispatch.hpp"
#include "algorithms/engines/host_signals.hpp"
#include "algorithms/engines/peer_fold.hpp"
#include "algorithms/engines/single_copy.hpp"
#include "core/check.hpp"
#include "core/copy_bytes.hpp"
#include "patterns/block_partition.hpp"

#include <algorithm>
#include <atomic>
#include <functional>
#include <vector>

namespace cohort::algorithms {
namespace {

std::atomic<std::uint64_t> helped_allreduce_count{0};
std::atomic<std::uint64_t> helped_reduce_scatter_count{0};
std::atomic<std::uint64_t> helped_reduce_count{0};

/// Table entries (SingleCopyOp): every rank's input; the leader's result and staging.
constexpr std::size_t kInputEntry = 0;
static_assert(kInputEntry == 0, "fold_copied_from_peers folds entry 0 of every rank's table");
constexpr std::size_t kResultEntry = 1;
constexpr std::size_t kStagingEntry = 2;

/// What one pipelined fold moves (the allreduce's and the reduce_scatter's, below). Chunk c is
/// elements [c * k, c * k + kc) of each piece's run (kc = min(k, run - c * k)); piece p of it is
/// the input's elements [piece_starts[p] + c * k, ... + kc). The helpers fold every local rank's
/// pieces of chunk c into staging slot c % kStagingSlots, piece p at p * kc; the leader's
/// `leaders_op` turns the slot into chunk c's result, elements [c * k, c * k + kc) of its result
/// block; a helper copies the part of that which is its own, elements [own_from, own_from +
/// own_count) of the result, to `out` + (element - own_from).
struct FoldSchedule {
  const std::byte* in;
  std::size_t in_bytes;
  std::byte* out;
  DType dtype;
  ReduceOp op;
  std::vector<std::size_t> piece_starts;
  std::size_t run;
  std::size_t chunk_elems;
  std::byte* result;  ///< the leader's result block (null on helpers)
  std::size_t result_bytes;
  std::size_t own_from;
  std::size_t own_count;
  std::uint64_t announcement;
  /// On the leader: chunk c's op among the leaders, from `slot` (pieces x kc elements).
  std::function<void(const OpContext& leaders, std::size_t c, std::size_t kc, std::byte* slot)>
      leaders_op;

  std::size_t chunks() const { return chunks_of(run, chunk_elems); }
  std::size_t chunk_count(std::size_t c) const { return chunk_at(c, chunk_elems, run).count; }
  std::size_t slot_elements() const { return piece_starts.size() * chunk_elems; }
};

void lead(const OpContext& ctx, const OpContext& local, HostGroups& groups, const FoldSchedule& s,
          std::byte* staging) {
  const std::size_t es = dtype_size(s.dtype);
  const OpContext leaders = groups.leaders(ctx);
  std::vector<int> helpers;
  for (int r = 1; r < local.size; ++r) helpers.push_back(r);
  for (std::size_t c = 0; c < s.chunks(); ++c) {
    await_chunk(local, groups, helpers, kReadyStep, c);
    run_chunk_hook(local, c);
    // Each chunk's op among the leaders uses the op's tags again: the transport matches messages
    // of one tag between two ranks in the order they were posted, and every leader runs the same
    // chunks in the same order.
    s.leaders_op(leaders, c, s.chunk_count(c),
                 staging + (c % kStagingSlots) * s.slot_elements() * es);
    for (int h : helpers) signal_chunk(local, h, kDoneStep, c);
  }
}

void help(const OpContext& local, HostGroups& groups, SingleCopyOp& op, const FoldSchedule& s,
          std::byte* staging) {
  const std::size_t es = dtype_size(s.dtype);
  const int leader[1] = {0};
  const auto take_result = [&](std::size_t c) {
    await_chunk(local, groups, leader, kDoneStep, c);
    const std::size_t from = std::max(c * s.chunk_elems, s.own_from);
    const std::size_t to = std::min(c * s.chunk_elems + s.chunk_count(c), s.own_from + s.own_count);
    if (from < to)
      op.read_part(0, kResultEntry, s.result_bytes, from * es, s.out + (from - s.own_from) * es,
                   (to - from) * es);
  };
  const auto helpers = static_cast<std::size_t>(local.size - 1);
  const auto me = static_cast<std::size_t>(local.rank - 1);
  for (std::size_t c = 0; c < s.chunks(); ++c) {
    if (c >= kStagingSlots) take_result(c - kStagingSlots);
    const std::size_t kc = s.chunk_count(c);
    run_chunk_hook(local, c);
    const patterns::BlockRange slice = patterns::balanced_block(kc, helpers, me);
    std::byte* slot = staging + (c % kStagingSlots) * s.slot_elements() * es;
    for (std::size_t p = 0; p < s.piece_starts.size(); ++p) {
      const std::size_t at = (s.piece_starts[p] + c * s.chunk_elems + slice.offset) * es;
      fold_copied_from_peers(local, op, s.op, s.dtype, slot + (p * kc + slice.offset) * es,
                             s.in + at, slice.count, s.in_bytes, at);
    }
    signal_chunk(local, 0, kReadyStep, c);
  }
  for (std::size_t c = s.chunks() > kStagingSlots ? s.chunks() - kStagingSlots : 0; c < s.chunks();
       ++c)
    take_result(c);
}

/// Runs `s` on every rank of the host (see host_pipeline.hpp); false, having moved nothing, when
/// the leader's staging is not mappable.
bool fold_through_helpers(const OpContext& ctx, HostGroups& groups, const FoldSchedule& s) {
  const OpContext local = groups.local(ctx);
  const std::size_t staging_bytes = kStagingSlots * s.slot_elements() * dtype_size(s.dtype);
  std::byte* own_staging = groups.is_leader() ? groups.mappable_staging(staging_bytes) : nullptr;

  transport::SharedArena& arena = *local.arena();
  // Every flag of the op carries what it is, as the arena's own algorithms' do (dispatch.cpp): a
  // peer that failed, or runs another op, is then found in every wait and after every copy.
  arena.begin_op(s.announcement, &describe_announcement);
  SingleCopyOp op(local, arena);
  std::vector<ExposedBlock> blocks(groups.is_leader() ? 3 : 1);
  blocks[kInputEntry] = {s.in, s.in_bytes};
  if (groups.is_leader()) {
    blocks[kResultEntry] = {s.result, s.result_bytes};
    blocks[kStagingEntry] = {own_staging, own_staging != nullptr ? staging_bytes : 0};
  }
  op.expose(blocks);
  // The leader's table says whether its staging is mappable: the same answer on the whole host.
  if (!op.entry_mappable(0, kStagingEntry, staging_bytes)) {
    op.release_after_all();
    return false;
  }
  try {
    if (groups.is_leader()) {
      lead(ctx, local, groups, s, own_staging);
    } else {
      std::byte* staging = op.mapped(0, kStagingEntry, staging_bytes);
      COHORT_CHECK(staging != nullptr);  // entry_mappable said it is there
      help(local, groups, op, s, staging);
    }
  } catch (...) {
    // The SingleCopyOp marks this rank failed as the error leaves (its waits and copies check
    // that mark); the ranks waiting for this one's signals learn it from this.
    abandon_signals(local, groups.is_leader());
    throw;
  }
  op.release_after_all();
  return true;
}

}  // namespace

bool allreduce_through_helpers(const OpContext& ctx, HostGroups& groups, const AllreduceArgs& args,
                               std::size_t chunk_elems) {
  const std::size_t es = dtype_size(args.dtype);
  const std::size_t bytes = args.count * es;
  auto* out = static_cast<std::byte*>(args.out);
  FoldSchedule s{static_cast<const std::byte*>(args.in),
                 bytes,
                 out,
                 args.dtype,
                 args.op,
                 {0},
                 args.count,
                 chunk_elems,
                 groups.is_leader() ? out : nullptr,
                 bytes,
                 0,
                 args.count,
                 announcement_of(args, bytes, Algorithm::SingleCopy),
                 {}};
  // The leaders' allreduce of chunk c goes straight into the leader's output, its result.
  s.leaders_op = [&](const OpContext& leaders, std::size_t c, std::size_t kc, std::byte* slot) {
    run_collective(leaders, groups.staging(),
                   AllreduceArgs{slot, out + c * chunk_elems * es, kc, args.dtype, args.op},
                   Algorithm::Auto);
  };
  if (!fold_through_helpers(ctx, groups, s)) return false;
  helped_allreduce_count.fetch_add(1, std::memory_order_relaxed);
  return true;
}

bool reduce_scatter_through_helpers(const OpContext& ctx, HostGroups& groups,
                                    const ReduceScatterArgs& args, std::size_t chunk_elems) {
  const std::size_t es = dtype_size(args.dtype);
  const auto ranks = static_cast<std::size_t>(ctx.size);
  const auto local_size = static_cast<std::size_t>(groups.local_size());
  const std::size_t share = local_size * args.count;  // a host's blocks
  const std::size_t bytes = ranks * args.count * es;
  auto* out = static_cast<std::byte*>(args.out);
  // The host's reduced share, chunk by chunk, on the leader; its helpers copy their blocks out.
  std::byte* reduced_share = groups.is_leader() ? groups.buffers().get(share * es, 0) : nullptr;
  FoldSchedule s{static_cast<const std::byte*>(args.in),
                 bytes,
                 out,
                 args.dtype,
                 args.op,
                 {},
                 share,
                 chunk_elems,
                 reduced_share,
                 share * es,
                 static_cast<std::size_t>(groups.local_index_of(ctx.rank)) * args.count,
                 args.count,
                 announcement_of(args, bytes, Algorithm::SingleCopy),
                 {}};
  for (int h = 0; h < groups.hosts(); ++h) s.piece_starts.push_back(std::size_t(h) * share);
  // The leaders' reduce_scatter of chunk c: every host's piece of it in, this host's reduced
  // piece out; then the leader's own block's part of it (the share's first block) to its output.
  s.leaders_op = [&](const OpContext& leaders, std::size_t c, std::size_t kc, std::byte* slot) {
    const std::size_t at = c * chunk_elems;
    run_collective(leaders, groups.staging(),
                   ReduceScatterArgs{slot, reduced_share + at * es, kc, args.dtype, args.op},
                   Algorithm::Auto);
    if (at < args.count)
      copy_bytes(out + at * es, reduced_share + at * es, std::min(kc, args.count - at) * es);
  };
  if (!fold_through_helpers(ctx, groups, s)) return false;
  helped_reduce_scatter_count.fetch_add(1, std::memory_order_relaxed);
  return true;
}

bool reduce_through_helpers(const OpContext& ctx, HostGroups& groups, const ReduceArgs& args,
                            std::size_t chunk_elems) {
  const std::size_t es = dtype_size(args.dtype);
  const std::size_t bytes = args.count * es;
  const int root_host = groups.host_of(args.root);
  const bool root_here = groups.host_index() == root_host;
  const bool root_leads = root_here && groups.local_index_of(args.root) == 0;
  // The result lives on the root's host's leader: in the root's output when the root leads,
  // else in a buffer of the leader's that the root copies its chunks out of.
  std::byte* result = nullptr;
  if (groups.is_leader() && root_here)
    result = root_leads ? static_cast<std::byte*>(args.out) : groups.buffers().get(bytes, 0);
  const bool root_helps = ctx.rank == args.root && !groups.is_leader();
  FoldSchedule s{static_cast<const std::byte*>(args.in),
                 bytes,
                 static_cast<std::byte*>(args.out),
                 args.dtype,
                 args.op,
                 {0},
                 args.count,
                 chunk_elems,
                 result,
                 root_here ? bytes : 0,
                 0,
                 root_helps ? args.count : 0,
                 announcement_of(args, bytes, Algorithm::SingleCopy),
                 {}};
  s.leaders_op = [&](const OpContext& leaders, std::size_t c, std::size_t kc, std::byte* slot) {
    run_collective(leaders, groups.staging(),
                   ReduceArgs{slot, result != nullptr ? result + c * chunk_elems * es : nullptr, kc,
                              args.dtype, args.op, root_host},
                   Algorithm::Auto);
  };
  if (!fold_through_helpers(ctx, groups, s)) return false;
  helped_reduce_count.fetch_add(1, std::memory_order_relaxed);
  return true;
}

namespace testing {
std::uint64_t helped_reduces() noexcept {
  return helped_reduce_count.load(std::memory_order_relaxed);
}
std::uint64_t helped_allreduces() noexcept {
  return helped_allreduce_count.load(std::memory_order_relaxed);
}
std::uint64_t helped_reduce_scatters() noexcept {
  return helped_reduce_scatter_count.load(std::memory_order_relaxed);
}
}  // namespace testing

}  // namespace cohort::algorithms
