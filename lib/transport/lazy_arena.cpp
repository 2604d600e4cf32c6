#include "transport/lazy_arena.hpp"

#include <algorithm>

namespace cohort::transport {

LazyArena::LazyArena(std::shared_ptr<Store> store, std::string key_prefix, int rank, int size,
                     int local_world_size, bool eligible)
    : store_(std::move(store)),
      key_prefix_(std::move(key_prefix)),
      rank_(rank),
      size_(size),
      local_world_size_(local_world_size),
      tried_(!eligible || size < 2) {}

SharedArena* LazyArena::get(Deadline deadline) {
  if (tried_) return arena_.get();
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
  arena_ = SharedArena::create(*store_, key_prefix_, rank_, size_, local_world_size_,
                               std::max(left, std::chrono::milliseconds(1)));
  tried_ = true;
  return arena_.get();
}

}  // namespace cohort::transport
