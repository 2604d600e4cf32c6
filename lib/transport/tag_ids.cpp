#include "transport/tag_ids.hpp"

#include "core/check.hpp"

#include <atomic>

namespace cohort::transport {
namespace {

bool is_set(const TagMask& mask, std::uint32_t id) noexcept {
  return (mask[id / 64] >> (id % 64)) & 1u;
}

std::atomic<bool> offers_busy{false};
std::atomic<bool> offers_full{false};

}  // namespace

namespace testing {
void offer_busy(bool busy) noexcept {
  offers_busy.store(busy, std::memory_order_relaxed);
}
void offer_full(bool full) noexcept {
  offers_full.store(full, std::memory_order_relaxed);
}
}  // namespace testing

TagIdPool::TagIdPool() {
  used_[0] |= 1u;
  used_[kTagMaskWords - 1] |= std::uint64_t{1} << 63;
}

TagOffer TagIdPool::offer() {
  std::lock_guard lock(mutex_);
  if (allocating_ || offers_busy.load(std::memory_order_relaxed)) {
    TagOffer full;
    full.used.fill(~std::uint64_t{0});
    full.last = last_;
    full.busy = true;
    return full;
  }
  allocating_ = true;
  if (offers_full.load(std::memory_order_relaxed)) {
    TagOffer full{used_, last_, false};
    full.used.fill(~std::uint64_t{0});
    return full;
  }
  return TagOffer{used_, last_, false};
}

void TagIdPool::finish(const TagOffer& offer, std::optional<std::uint32_t> id) {
  std::lock_guard lock(mutex_);
  if (offer.busy) {
    COHORT_CHECK(!id);  // a full mask leaves nothing to choose
    return;
  }
  allocating_ = false;
  if (!id) return;
  COHORT_CHECK(*id < kTagIds && !is_set(used_, *id));
  used_[*id / 64] |= std::uint64_t{1} << (*id % 64);
  last_ = *id;
}

void TagIdPool::release(std::uint32_t id) noexcept {
  std::lock_guard lock(mutex_);
  used_[id / 64] &= ~(std::uint64_t{1} << (id % 64));
}

std::optional<std::uint32_t> TagIdPool::choose(std::span<const TagOffer> offers) {
  TagMask used{};
  std::uint32_t last = 0;
  for (const TagOffer& offer : offers) {
    for (std::size_t w = 0; w < kTagMaskWords; ++w) used[w] |= offer.used[w];
    last = std::max(last, offer.last);
  }
  for (std::uint32_t step = 1; step <= kTagIds; ++step) {
    const std::uint32_t id = (last + step) % kTagIds;
    if (!is_set(used, id)) return id;
  }
  return std::nullopt;
}

}  // namespace cohort::transport
