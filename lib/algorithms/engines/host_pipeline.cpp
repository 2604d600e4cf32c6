#include "algorithms/engines/host_pipeline.hpp"

#include <cohort/error.hpp>

#include "algorithms/announcement.hpp"
#include "algorithms/dispatch.hpp"
#include "algorithms/engines/peer_fold.hpp"
#include "algorithms/engines/single_copy.hpp"
#include "core/check.hpp"
#include "patterns/block_partition.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <span>
#include <string>
#include <vector>

namespace cohort::algorithms {
namespace {

std::atomic<std::uint64_t> helped_allreduce_count{0};

/// The steps of the op's tag space the signals use: just below HostGroups' set-up, far from the
/// steps of the leaders' allreduces (whose messages come from other hosts' leaders anyway).
constexpr std::uint32_t kReadyStep = HostGroups::kFirstSetupStep - 1;
constexpr std::uint32_t kDoneStep = HostGroups::kFirstSetupStep - 2;

/// Table entries (SingleCopyOp): every rank's input; the leader's output and staging.
constexpr std::size_t kInputEntry = 0;
static_assert(kInputEntry == 0, "fold_copied_from_peers folds entry 0 of every rank's table");
constexpr std::size_t kOutputEntry = 1;
constexpr std::size_t kStagingEntry = 2;

/// What a rank whose part of the op failed sends in place of a chunk number, so that the peers
/// waiting for its signal fail at once instead of at their deadline.
constexpr std::uint64_t kAbandoned = ~std::uint64_t{0};

std::atomic<void (*)(int, std::size_t)> chunk_hook{nullptr};

/// Cancels the view's requests before the error leaves: their buffers are on this frame, and a
/// late signal must not land in them once it is gone. The op's other requests on the view are
/// none (the view is the host group's, which one op uses at a time).
template <class Body>
void cancelling_on_error(const OpContext& local, Body&& body) {
  try {
    body();
  } catch (...) {
    local.transport.cancel_all();
    throw;
  }
}

/// Sends `value` (a chunk number, or kAbandoned) to `peer` and waits until it left.
void signal(const OpContext& local, int peer, std::uint32_t step, std::uint64_t value) {
  cancelling_on_error(local, [&] {
    const transport::Request sent =
        local.transport.post_send(peer, &value, sizeof value, local.tag(step));
    local.transport.wait(std::span<const transport::Request>(&sent, 1), local.deadline, local.what);
  });
}

/// Waits for the signal of chunk `chunk` from each of `peers` (local ranks); signals come in
/// chunk order.
void await(const OpContext& local, HostGroups& groups, std::span<const int> peers,
           std::uint32_t step, std::uint64_t chunk) {
  std::vector<std::uint64_t> got(peers.size(), kAbandoned);
  cancelling_on_error(local, [&] {
    std::vector<transport::Request> requests;
    requests.reserve(peers.size());
    for (std::size_t i = 0; i < peers.size(); ++i)
      requests.push_back(
          local.transport.post_recv(peers[i], &got[i], sizeof got[i], local.tag(step)));
    local.transport.wait(requests, local.deadline, local.what);
  });
  for (std::size_t i = 0; i < peers.size(); ++i) {
    if (got[i] == chunk) continue;
    const int rank = groups.members(groups.host_index()).at(static_cast<std::size_t>(peers[i]));
    if (got[i] == kAbandoned)
      throw Error(ErrorCode::RemoteError,
                  "rank " + std::to_string(rank) + " failed in this op (on this host)",
                  ErrorContext{.op = local.what, .peers = {rank}});
    throw Error(ErrorCode::Internal,
                "rank " + std::to_string(rank) + " signalled chunk " + std::to_string(got[i]) +
                    " where " + std::to_string(chunk) + " was due",
                ErrorContext{.op = local.what, .peers = {rank}});
  }
}

/// After this rank's part failed: tells the ranks that may wait for its signals (the leader its
/// helpers, a helper its leader), without waiting past a moment for a message that cannot leave.
void abandon(const OpContext& local, bool leader) noexcept {
  OpContext brief = local;
  brief.deadline =
      std::min(local.deadline, std::chrono::steady_clock::now() + std::chrono::milliseconds(100));
  const auto tell = [&](int peer, std::uint32_t step) {
    try {
      signal(brief, peer, step, kAbandoned);
    } catch (...) {
      // The transport itself may be what failed; the peer then meets its deadline or the
      // failure itself.
    }
  };
  if (leader) {
    for (int h = 1; h < local.size; ++h) tell(h, kDoneStep);
  } else {
    tell(0, kReadyStep);
  }
}

struct Chunk {
  std::size_t offset;  ///< elements
  std::size_t count;
};

Chunk chunk_at(std::size_t c, std::size_t chunk_elems, std::size_t count) {
  const std::size_t offset = c * chunk_elems;
  return {offset, std::min(chunk_elems, count - offset)};
}

void run_hook(const OpContext& local, std::size_t c) {
  if (auto* hook = chunk_hook.load(std::memory_order_relaxed)) hook(local.rank, c);
}

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
    await(local, groups, helpers, kReadyStep, c);
    run_hook(local, c);
    // Each chunk's allreduce among the leaders uses the op's tags again: the transport matches
    // messages of one tag between two ranks in the order they were posted, and every leader
    // runs the same chunks in the same order.
    run_collective(leaders, groups.staging(),
                   AllreduceArgs{staging + (c % kStagingSlots) * chunk_elems * es,
                                 out + chunk.offset * es, chunk.count, args.dtype, args.op},
                   Algorithm::Auto);
    for (int h : helpers) signal(local, h, kDoneStep, c);
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
    await(local, groups, leader, kDoneStep, c);
    const Chunk chunk = chunk_at(c, chunk_elems, args.count);
    op.read_part(0, kOutputEntry, bytes, chunk.offset * es, out + chunk.offset * es,
                 chunk.count * es);
  };
  const auto helpers = static_cast<std::size_t>(local.size - 1);
  const auto me = static_cast<std::size_t>(local.rank - 1);
  for (std::size_t c = 0; c < chunks; ++c) {
    if (c >= kStagingSlots) take_result(c - kStagingSlots);
    const Chunk chunk = chunk_at(c, chunk_elems, args.count);
    run_hook(local, c);
    const patterns::BlockRange slice = patterns::balanced_block(chunk.count, helpers, me);
    const std::size_t at = (chunk.offset + slice.offset) * es;
    fold_copied_from_peers(local, op, args.op, args.dtype,
                           staging + ((c % kStagingSlots) * chunk_elems + slice.offset) * es,
                           in + at, slice.count, bytes, at);
    signal(local, 0, kReadyStep, c);
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
  const std::size_t chunks = (args.count + chunk_elems - 1) / chunk_elems;
  const std::size_t staging_bytes = kStagingSlots * chunk_elems * es;
  std::byte* own_staging = groups.is_leader() ? groups.mappable_staging(staging_bytes) : nullptr;

  transport::SharedArena& arena = *local.arena();
  // Every flag of the op carries what it is, as the arena's own algorithms' do (dispatch.cpp): a
  // peer that failed, or runs another op, is then found in every wait and after every copy.
  arena.begin_op(announcement_of(args, bytes, Algorithm::SingleCopy), &describe_announcement);
  SingleCopyOp op(local, arena);
  std::vector<ExposedBlock> blocks{{args.in, bytes}};
  if (groups.is_leader()) {
    blocks.push_back({args.out, bytes});
    blocks.push_back({own_staging, own_staging != nullptr ? staging_bytes : 0});
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
    abandon(local, groups.is_leader());
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
void set_pipeline_chunk_hook(void (*hook)(int local_rank, std::size_t chunk)) noexcept {
  chunk_hook.store(hook, std::memory_order_relaxed);
}
}  // namespace testing

}  // namespace cohort::algorithms
