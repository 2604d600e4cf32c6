#include "algorithms/engines/point_to_point.hpp"

#include "core/check.hpp"

namespace cohort::algorithms {

transport::Request post_send(const OpContext& ctx, int peer, const void* data, std::size_t bytes,
                             std::uint32_t step) {
  if (bytes == 0) return {};
  COHORT_CHECK_MSG(peer != ctx.rank, ctx.what + ": self-send");
  return ctx.transport.post_send(peer, data, bytes, ctx.tag(step));
}

transport::Request post_recv(const OpContext& ctx, int peer, void* data, std::size_t bytes,
                             std::uint32_t step) {
  if (bytes == 0) return {};
  COHORT_CHECK_MSG(peer != ctx.rank, ctx.what + ": self-receive");
  return ctx.transport.post_recv(peer, data, bytes, ctx.tag(step));
}

void wait_request(const OpContext& ctx, transport::Request& request) {
  if (!request.valid()) return;
  ctx.transport.wait({&request, 1}, ctx.deadline, ctx.what);
  request = {};
}

void RequestBatch::add(const transport::Request& request) {
  if (!request.valid()) return;
  if (count_ < inline_.size() && overflow_.empty()) {
    inline_[count_++] = request;
    return;
  }
  if (overflow_.empty()) overflow_.assign(inline_.begin(), inline_.begin() + count_);
  overflow_.push_back(request);
  ++count_;
}

void RequestBatch::send(int peer, const void* data, std::size_t bytes, std::uint32_t step) {
  add(post_send(ctx_, peer, data, bytes, step));
}

void RequestBatch::recv(int peer, void* data, std::size_t bytes, std::uint32_t step) {
  add(post_recv(ctx_, peer, data, bytes, step));
}

void RequestBatch::wait() {
  if (count_ == 0) return;
  const std::span<const transport::Request> requests =
      overflow_.empty() ? std::span<const transport::Request>(inline_.data(), count_)
                        : std::span<const transport::Request>(overflow_);
  ctx_.transport.wait(requests, ctx_.deadline, ctx_.what);
  overflow_.clear();
  count_ = 0;
}

void exchange(const OpContext& ctx, int send_peer, const void* send_data, std::size_t send_bytes,
              int recv_peer, void* recv_data, std::size_t recv_bytes, std::uint32_t step) {
  RequestBatch batch(ctx);
  batch.recv(recv_peer, recv_data, recv_bytes, step);
  batch.send(send_peer, send_data, send_bytes, step);
  batch.wait();
}

}  // namespace cohort::algorithms
