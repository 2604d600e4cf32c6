#include "core/mappable_cache.hpp"

#include <cstdint>

namespace cohort {

std::optional<CachedMappable> MappableCache::take(std::size_t bytes, pid_t owner,
                                                  Released& foreign) noexcept {
  const std::size_t most = bytes > SIZE_MAX - bytes / 4 ? SIZE_MAX : bytes + bytes / 4;
  constexpr std::size_t kNone = kMaxBlocks;  // not count_: foreign blocks leave on the way
  std::size_t best = kNone;
  for (std::size_t i = 0; i < count_;) {
    const CachedMappable& block = entries_[i].block;
    if (block.owner != owner) {
      foreign.add(block);
      remove(i);  // the last entry moved into i: look at i again
      continue;
    }
    if (block.bytes >= bytes && block.bytes <= most &&
        (best == kNone || block.bytes < entries_[best].block.bytes))
      best = i;
    ++i;
  }
  if (best == kNone) return std::nullopt;
  const CachedMappable taken = entries_[best].block;
  remove(best);
  return taken;
}

void MappableCache::keep(const CachedMappable& block, std::size_t limit_bytes,
                         Released& released) noexcept {
  if (block.bytes > limit_bytes) {
    released.add(block);
    return;
  }
  while (count_ > 0 && (count_ == kMaxBlocks || bytes_ > limit_bytes - block.bytes)) {
    std::size_t oldest = 0;
    for (std::size_t i = 1; i < count_; ++i)
      if (entries_[i].order < entries_[oldest].order) oldest = i;
    released.add(entries_[oldest].block);
    remove(oldest);
  }
  entries_[count_++] = Entry{block, next_order_++};
  bytes_ += block.bytes;
}

void MappableCache::drain(Released& released) noexcept {
  while (count_ > 0) {
    released.add(entries_[count_ - 1].block);
    remove(count_ - 1);
  }
}

void MappableCache::remove(std::size_t i) noexcept {
  bytes_ -= entries_[i].block.bytes;
  entries_[i] = entries_[--count_];
}

}  // namespace cohort
