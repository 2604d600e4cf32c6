#include "algorithms/engines/host_pipeline.hpp"

#include "algorithms/announcement.hpp"
#include "algorithms/dispatch.hpp"
#include "algorithms/engines/host_signals.hpp"
#include "algorithms/engines/peer_fold.hpp"
#include "algorithms/engines/single_copy.hpp"
#include "core/check.hpp"
#include "patterns/block_partition.hpp"

#include <atomic>
#include <vector>

namespace cohort::algorithms {
namespace {

std::atomic<std::uint64_t> helped_allreduce_count{0};

/// Table entries (SingleCopyOp): every rank's input; the leader's output and staging.
constexpr std::size_t kInputEntry = 0;
static_assert(kInputEntry == 0, "fold_copied_from_peers folds entry 0 of every rank's table");
constexpr std::size_t kOutputEntry = 1;
constexpr std::size_t kStagingEntry = 2;

void lead(const OpContext& ctx, const OpContext& local, HostGroups& groups,
          const AllreduceArgs& args, std::size_t chunk_elems, std::size_t chunks,
          std::byte* staging) {
  const std::size_t es = dtype_size(args.dtype);
  const OpContext leaders = groups.leaders(ctx);
  std::vector<int> helpers;
  for (int r = 1; r < local.size; ++r) helpers.push_back(r);
  auto* out = static_cast<std::byte*>(args.out);
  for (std::size_t c = 0; c < chunks; ++c) {
    const Chunk chunk = chunk_at(c, chunk_elems, args.count);
    await_chunk(local, groups, helpers, kReadyStep, c);
    run_chunk_hook(local, c);
    // Each chunk's allreduce among the leaders uses the op's tags again: the transport matches
    // messages of one tag between two ranks in the order they were posted, and every leader
    // runs the same chunks in the same order.
    run_collective(leaders, groups.staging(),
                   AllreduceArgs{staging + (c % kStagingSlots) * chunk_elems * es,
                                 out + chunk.offset * es, chunk.count, args.dtype, args.op},
                   Algorithm::Auto);
    for (int h : helpers) signal_chunk(local, h, kDoneStep, c);
  }
}

void help(const OpContext& local, HostGroups& groups, SingleCopyOp& op, const AllreduceArgs& args,
          std::size_t chunk_elems, std::size_t chunks, std::byte* staging) {
  const std::size_t es = dtype_size(args.dtype);
  const std::size_t bytes = args.count * es;
  const auto* in = static_cast<const std::byte*>(args.in);
  auto* out = static_cast<std::byte*>(args.out);
  const int leader[1] = {0};
  const auto take_result = [&](std::size_t c) {
    await_chunk(local, groups, leader, kDoneStep, c);
    const Chunk chunk = chunk_at(c, chunk_elems, args.count);
    op.read_part(0, kOutputEntry, bytes, chunk.offset * es, out + chunk.offset * es,
                 chunk.count * es);
  };
  const auto helpers = static_cast<std::size_t>(local.size - 1);
  const auto me = static_cast<std::size_t>(local.rank - 1);
  for (std::size_t c = 0; c < chunks; ++c) {
    if (c >= kStagingSlots) take_result(c - kStagingSlots);
    const Chunk chunk = chunk_at(c, chunk_elems, args.count);
    run_chunk_hook(local, c);
    const patterns::BlockRange slice = patterns::balanced_block(chunk.count, helpers, me);
    const std::size_t at = (chunk.offset + slice.offset) * es;
    fold_copied_from_peers(local, op, args.op, args.dtype,
                           staging + ((c % kStagingSlots) * chunk_elems + slice.offset) * es,
                           in + at, slice.count, bytes, at);
    signal_chunk(local, 0, kReadyStep, c);
  }
  for (std::size_t c = chunks > kStagingSlots ? chunks - kStagingSlots : 0; c < chunks; ++c)
    take_result(c);
}

}  // namespace

bool allreduce_through_helpers(const OpContext& ctx, HostGroups& groups, const AllreduceArgs& args,
                               std::size_t chunk_elems) {
  const OpContext local = groups.local(ctx);
  const std::size_t es = dtype_size(args.dtype);
  const std::size_t bytes = args.count * es;
  const std::size_t chunks = chunks_of(args.count, chunk_elems);
  const std::size_t staging_bytes = kStagingSlots * chunk_elems * es;
  std::byte* own_staging = groups.is_leader() ? groups.mappable_staging(staging_bytes) : nullptr;

  transport::SharedArena& arena = *local.arena();
  // Every flag of the op carries what it is, as the arena's own algorithms' do (dispatch.cpp): a
  // peer that failed, or runs another op, is then found in every wait and after every copy.
  arena.begin_op(announcement_of(args, bytes, Algorithm::SingleCopy), &describe_announcement);
  SingleCopyOp op(local, arena);
  std::vector<ExposedBlock> blocks(groups.is_leader() ? 3 : 1);
  blocks[kInputEntry] = {args.in, bytes};
  if (groups.is_leader()) {
    blocks[kOutputEntry] = {args.out, bytes};
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
      lead(ctx, local, groups, args, chunk_elems, chunks, own_staging);
    } else {
      std::byte* staging = op.mapped(0, kStagingEntry, staging_bytes);
      COHORT_CHECK(staging != nullptr);  // entry_mappable said it is there
      help(local, groups, op, args, chunk_elems, chunks, staging);
    }
  } catch (...) {
    // The SingleCopyOp marks this rank failed as the error leaves (its waits and copies check
    // that mark); the ranks waiting for this one's signals learn it from this.
    abandon_signals(local, groups.is_leader());
    throw;
  }
  op.release_after_all();
  helped_allreduce_count.fetch_add(1, std::memory_order_relaxed);
  return true;
}

namespace testing {
std::uint64_t helped_allreduces() noexcept {
  return helped_allreduce_count.load(std::memory_order_relaxed);
}
}  // namespace testing

}  // namespace cohort::algorithms
