#include "capi/buffer_descriptors.hpp"

#include <atomic>
#include <cstddef>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>

namespace cohort::capi {
namespace {

struct Registry {
  std::shared_mutex mutex;  ///< shared by the lookups of concurrent collectives
  std::unordered_map<const DLTensor*, Buffer> buffers;
  std::atomic<std::size_t> live{0};  ///< buffers.size(), read without the lock
};

Registry& registry() {
  static Registry* const instance = new Registry;  // never destroyed: handles may outlive main
  return *instance;
}

}  // namespace

void note_buffer_descriptor(const DLTensor* tensor, const Buffer& buffer) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  r.buffers.insert_or_assign(tensor, buffer);
  r.live.store(r.buffers.size(), std::memory_order_relaxed);
}

void forget_buffer_descriptor(const DLTensor* tensor) noexcept {
  Registry& r = registry();
  Buffer leaving;  // released after the lock: the producer's deleter may run
  {
    std::lock_guard lock(r.mutex);
    const auto it = r.buffers.find(tensor);
    if (it == r.buffers.end()) return;
    leaving = std::move(it->second);
    r.buffers.erase(it);
    r.live.store(r.buffers.size(), std::memory_order_relaxed);
  }
}

std::optional<Buffer> buffer_of_descriptor(const DLTensor* tensor) {
  Registry& r = registry();
  // A descriptor noted on another thread reaches this one only through the caller's own
  // hand-over after cohort_buffer_tensor returned it, which orders the note before this load.
  if (r.live.load(std::memory_order_relaxed) == 0) return std::nullopt;
  std::shared_lock lock(r.mutex);
  const auto it = r.buffers.find(tensor);
  if (it == r.buffers.end()) return std::nullopt;
  return it->second;
}

}  // namespace cohort::capi
