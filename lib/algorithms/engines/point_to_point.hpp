#pragma once

// The message primitives every algorithm file uses, on top of the transport: post a send or a
// receive tagged with one of the op's steps, and wait for a set of them under the op's deadline.
// Zero-byte messages are skipped on both ends (both ends compute the same size from arguments
// that agree across ranks), so blocks that are empty when count < size cost nothing.

#include "algorithms/op_context.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace cohort::algorithms {

/// Posts `bytes` from `data` to `peer` with tag ctx.tag(step); an invalid Request when bytes == 0.
transport::Request post_send(const OpContext& ctx, int peer, const void* data, std::size_t bytes,
                             std::uint32_t step);
/// Posts a receive of exactly `bytes` from `peer` into `data`; an invalid Request when bytes == 0.
transport::Request post_recv(const OpContext& ctx, int peer, void* data, std::size_t bytes,
                             std::uint32_t step);
/// Waits for `request` (no-op when invalid) under ctx.deadline, then marks it invalid.
void wait_request(const OpContext& ctx, transport::Request& request);

/// A set of posted requests completed together: post everything of one step, then wait().
class RequestBatch {
 public:
  explicit RequestBatch(const OpContext& ctx) : ctx_(ctx) {}

  void send(int peer, const void* data, std::size_t bytes, std::uint32_t step);
  void recv(int peer, void* data, std::size_t bytes, std::uint32_t step);
  /// Waits for every request posted since the last wait() (throws at the op's deadline).
  void wait();
  /// Requests not yet waited for.
  std::size_t pending() const noexcept { return count_; }

 private:
  void add(const transport::Request& request);

  // Most steps post a handful of requests: keep them on the stack so a small collective does not
  // allocate; larger batches spill into the vector.
  static constexpr std::size_t kInlineRequests = 8;
  const OpContext& ctx_;
  std::array<transport::Request, kInlineRequests> inline_{};
  std::vector<transport::Request> overflow_;
  std::size_t count_ = 0;
};

/// Receives from `recv_peer` and sends to `send_peer` at the same step, then waits for both.
void exchange(const OpContext& ctx, int send_peer, const void* send_data, std::size_t send_bytes,
              int recv_peer, void* recv_data, std::size_t recv_bytes, std::uint32_t step);

}  // namespace cohort::algorithms
