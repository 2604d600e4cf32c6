#pragma once

// Slots for in-flight requests, addressed by Request handles. Each slot carries a generation that
// is bumped on release, so a handle kept after its request was released (a stale handle) is
// detected instead of silently naming whatever request reuses the slot.

#include "core/check.hpp"
#include "transport/transport.hpp"

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

namespace cohort::transport {

template <typename Entry>
class RequestTable {
 public:
  /// Stores `entry` and returns its handle.
  Request insert(Entry entry) { return emplace(std::move(entry)); }
  /// Builds an entry from `args` in its slot and returns its handle: given an entry, moves it in
  /// once (insert's by-value parameter is a second move; a transport's entry is a few hundred
  /// bytes, and a small receive posts one).
  template <typename... Args>
  Request emplace(Args&&... args) {
    std::uint32_t slot;
    if (!free_.empty()) {
      slot = free_.back();
      free_.pop_back();
    } else {
      COHORT_CHECK(slots_.size() < UINT32_MAX - 2);  // the top two are invalid() and completed()
      slot = static_cast<std::uint32_t>(slots_.size());
      slots_.emplace_back();
    }
    Slot& s = slots_[slot];
    s.entry.emplace(std::forward<Args>(args)...);
    ++live_;
    return Request{slot, s.generation};
  }

  /// The entry `request` names, or nullptr when the handle is invalid or stale.
  Entry* find(const Request& request) noexcept {
    if (!request.valid() || request.slot >= slots_.size()) return nullptr;
    Slot& s = slots_[request.slot];
    if (s.generation != request.generation || !s.entry) return nullptr;
    return &*s.entry;
  }

  /// Destroys the entry and invalidates every handle to it. The handle must be live.
  void release(const Request& request) noexcept {
    COHORT_CHECK(find(request) != nullptr);
    Slot& s = slots_[request.slot];
    s.entry.reset();
    ++s.generation;
    free_.push_back(request.slot);
    --live_;
  }

  /// Calls fn(Request, Entry&) for every live entry.
  template <typename Fn>
  void for_each(Fn&& fn) {
    for (std::uint32_t i = 0; i < slots_.size(); ++i)
      if (slots_[i].entry) fn(Request{i, slots_[i].generation}, *slots_[i].entry);
  }

  /// Releases every live entry.
  void clear() noexcept {
    for (std::uint32_t i = 0; i < slots_.size(); ++i)
      if (slots_[i].entry) release(Request{i, slots_[i].generation});
  }

  std::size_t live() const noexcept { return live_; }

 private:
  struct Slot {
    std::optional<Entry> entry;
    std::uint32_t generation = 0;
  };
  std::vector<Slot> slots_;
  std::vector<std::uint32_t> free_;
  std::size_t live_ = 0;
};

}  // namespace cohort::transport
