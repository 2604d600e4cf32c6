#include "transport/ucx/ucx_transport.hpp"

#include <cohort/error.hpp>

#include "core/check.hpp"
#include "transport/self_transport.hpp"

#include <utility>

namespace cohort::transport::ucx {

UcxTransport::UcxTransport(std::shared_ptr<UcxHub> hub, std::vector<int> world_ranks, int rank,
                           TagIdClaim tag)
    : hub_(std::move(hub)),
      world_ranks_(std::move(world_ranks)),
      rank_(rank),
      tag_(std::move(tag)) {
  COHORT_CHECK(rank_ >= 0 && rank_ < size() &&
               world_ranks_[static_cast<std::size_t>(rank_)] == hub_->rank());
}

UcxTransport::~UcxTransport() {
  hub_->cancel_owned(this);
  // Only an owner: a view sharing its communicator's id (host groups) must leave that
  // communicator's counts alone.
  if (tag_.held()) hub_->forget_tag_id(tag_.id());
}

void UcxTransport::refuse_peer(int peer, const char* what) const {
  throw Error(ErrorCode::InvalidArgument, std::string(what) + ": peer rank " +
                                              std::to_string(peer) + " is out of range [0, " +
                                              std::to_string(size()) + ")");
}

Request UcxTransport::post_send(int peer, const void* data, std::size_t bytes, Tag tag) {
  return hub_->post_send(world_rank(peer, "post_send"), data, bytes, tag,
                         UcxHub::Origin{this, peer});
}

Request UcxTransport::post_recv(int peer, void* data, std::size_t bytes, Tag tag) {
  return hub_->post_recv(world_rank(peer, "post_recv"), data, bytes, tag,
                         UcxHub::Origin{this, peer});
}

void UcxTransport::wait(std::span<const Request> requests, Deadline deadline,
                        const std::string& what) {
  hub_->wait(requests, deadline, what, &interruption_);
}

void UcxTransport::interrupt(const std::string& reason) noexcept {
  interruption_.raise(reason);
  hub_->wake_sleepers();
}

bool UcxTransport::test(const Request& request) {
  return hub_->test(request);
}

void UcxTransport::cancel_all() noexcept {
  hub_->cancel_owned(this);
}

void UcxTransport::retain_until_quiet(std::uint32_t tag_id, std::shared_ptr<void> keep) noexcept {
  hub_->retain_until_quiet(tag_id, std::move(keep));
}

std::string UcxTransport::description() const {
  return hub_->description();
}

std::unique_ptr<Transport> UcxTransport::derive(std::span<const int> members, int rank,
                                                TagIdClaim tag) {
  if (members.size() == 1) return std::make_unique<SelfTransport>();
  std::vector<int> world_ranks;
  world_ranks.reserve(members.size());
  for (int member : members) world_ranks.push_back(world_rank(member, "derive"));
  return std::make_unique<UcxTransport>(hub_, std::move(world_ranks), rank, std::move(tag));
}

}  // namespace cohort::transport::ucx
