#include "algorithms/engines/host_signals.hpp"

#include <cohort/error.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <string>
#include <vector>

namespace cohort::algorithms {
namespace {

/// Bytes per chunk. Measured on a 4 Gbit/s link (2 hosts x 2 ranks, bench/PERFORMANCE-LOG.md,
/// "Hierarchical allreduce, pipelined"): with 1 MiB chunks the pipelined allreduce took the time
/// of one rank per host's at 1-256 MiB; chunks of a sixteenth of the vector up to 8 MiB took
/// 1.14-1.20x that at 64 and 256 MiB, where the leaders' allreduce of each 4-8 MiB chunk ran
/// slower than of four or eight 1 MiB ones. The broadcast's chunks measured against the whole
/// vector in the same place ("Hierarchical broadcast in chunks"). Neither measured on faster
/// links (RDMA), where the per-chunk latency (the leaders' collective's start, and in the
/// allreduce two small messages in the host) weighs more and no kernel buffering overlaps a
/// broadcast's chunks.
constexpr std::size_t kChunkBytes = std::size_t{1} << 20;

/// What a rank whose part of the op failed sends in place of a chunk number.
constexpr std::uint64_t kAbandoned = ~std::uint64_t{0};

std::atomic<std::size_t> forced_chunk_bytes{0};
std::atomic<void (*)(int, std::size_t)> chunk_hook{nullptr};

/// Runs `body`; on an error, cancels the view's requests before it leaves: their buffers are on
/// the caller's frame, and a late signal must not land in them once it is gone.
template <class Body>
void cancelling_on_error(const OpContext& local, Body&& body) {
  try {
    body();
  } catch (...) {
    local.transport.cancel_all();
    throw;
  }
}

}  // namespace

std::size_t hierarchical_chunk_elements(DType dtype) {
  const std::size_t forced = forced_chunk_bytes.load(std::memory_order_relaxed);
  return std::max<std::size_t>((forced != 0 ? forced : kChunkBytes) / dtype_size(dtype), 1);
}

bool host_pipelines(const OpContext& ctx, const HostGroups& groups) {
  if (groups.local_size() < 2) return false;
  const transport::SharedArena* arena = groups.local(ctx).arena();
  return arena != nullptr && arena->single_copy();
}

void signal_chunk(const OpContext& local, int peer, std::uint32_t step, std::uint64_t chunk) {
  cancelling_on_error(local, [&] {
    const transport::Request sent =
        local.transport.post_send(peer, &chunk, sizeof chunk, local.tag(step));
    local.transport.wait(std::span<const transport::Request>(&sent, 1), local.deadline, local.what);
  });
}

void await_chunk(const OpContext& local, const HostGroups& groups, std::span<const int> peers,
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

void abandon_signals(const OpContext& local, bool leader) noexcept {
  OpContext brief = local;
  brief.deadline =
      std::min(local.deadline, std::chrono::steady_clock::now() + std::chrono::milliseconds(100));
  const auto tell = [&](int peer, std::uint32_t step) {
    try {
      signal_chunk(brief, peer, step, kAbandoned);
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

void run_chunk_hook(const OpContext& local, std::size_t c) {
  if (auto* hook = chunk_hook.load(std::memory_order_relaxed)) hook(local.rank, c);
}

namespace testing {
void set_hierarchical_chunk_bytes(std::size_t bytes) noexcept {
  forced_chunk_bytes.store(bytes, std::memory_order_relaxed);
}
void set_pipeline_chunk_hook(void (*hook)(int local_rank, std::size_t chunk)) noexcept {
  chunk_hook.store(hook, std::memory_order_relaxed);
}
}  // namespace testing

}  // namespace cohort::algorithms
