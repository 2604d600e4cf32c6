#pragma once

// UcxTransport: one communicator's view of a UcxHub. It numbers the communicator's ranks 0..n-1
// and maps them to the hub's world ranks; its requests are its own (cancel_all() cancels only
// them). The world's view maps every rank to itself; split() derives views over subsets, which
// cost a vector of ranks and a tag id (tag_ids.hpp), nothing in UCX.

#include "transport/interruption.hpp"
#include "transport/tag_ids.hpp"
#include "transport/transport.hpp"
#include "transport/ucx/ucx_hub.hpp"

#include <memory>
#include <string>
#include <vector>

namespace cohort::transport::ucx {

class UcxTransport final : public Transport {
 public:
  /// The view of communicator rank `rank` over hub ranks `world_ranks` (by communicator rank),
  /// holding tag id `tag` for as long as it lives.
  UcxTransport(std::shared_ptr<UcxHub> hub, std::vector<int> world_ranks, int rank, TagIdClaim tag);
  /// Cancels this view's pending requests (the hub and other views are untouched).
  ~UcxTransport() override;
  UcxTransport(const UcxTransport&) = delete;
  UcxTransport& operator=(const UcxTransport&) = delete;

  int rank() const noexcept override { return rank_; }
  int size() const noexcept override { return static_cast<int>(world_ranks_.size()); }
  Request post_send(int peer, const void* data, std::size_t bytes, Tag tag) override;
  Request post_recv(int peer, void* data, std::size_t bytes, Tag tag) override;
  void wait(std::span<const Request> requests, Deadline deadline, const std::string& what) override;
  bool test(const Request& request) override;
  void cancel_all() noexcept override;
  void retain_until_quiet(std::uint32_t tag_id, std::shared_ptr<void> keep) noexcept override;
  void interrupt(const std::string& reason) noexcept override;
  void set_side_work(SideWork* side_work) noexcept override {
    interruption_.set_side_work(side_work);
  }
  void wake_waiters() noexcept override { hub_->wake_sleepers(); }
  std::string description() const override;
  unsigned host_cpus() const noexcept override { return hub_->host_cpus(); }
  std::unique_ptr<Transport> derive(std::span<const int> members, int rank,
                                    TagIdClaim tag) override;
  std::shared_ptr<TagIdPool> tag_ids() const override { return hub_->tag_ids(); }

 private:
  /// The hub's rank for this view's `peer`; InvalidArgument naming `what` when out of range.
  int world_rank(int peer, const char* what) const {
    if (peer < 0 || peer >= size()) [[unlikely]]
      refuse_peer(peer, what);
    return world_ranks_[static_cast<std::size_t>(peer)];
  }
  [[noreturn]] void refuse_peer(int peer, const char* what) const;

  std::shared_ptr<UcxHub> hub_;
  std::vector<int> world_ranks_;
  int rank_;
  TagIdClaim tag_;
  Interruption interruption_;
};

}  // namespace cohort::transport::ucx
