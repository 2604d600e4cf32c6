#include "capi/read_only_descriptors.hpp"

#include <atomic>
#include <cstddef>
#include <mutex>
#include <shared_mutex>
#include <unordered_set>

namespace cohort::capi {
namespace {

struct Registry {
  std::shared_mutex mutex;  ///< shared by the lookups of concurrent collectives
  std::unordered_set<const DLTensor*> descriptors;
  std::atomic<std::size_t> live{0};  ///< descriptors.size(), read without the lock
};

Registry& registry() {
  static Registry* const instance = new Registry;  // never destroyed: handles may outlive main
  return *instance;
}

}  // namespace

void note_read_only_descriptor(const DLTensor* tensor) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  r.descriptors.insert(tensor);
  r.live.store(r.descriptors.size(), std::memory_order_relaxed);
}

void forget_read_only_descriptor(const DLTensor* tensor) noexcept {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  r.descriptors.erase(tensor);
  r.live.store(r.descriptors.size(), std::memory_order_relaxed);
}

bool is_read_only_descriptor(const DLTensor* tensor) noexcept {
  Registry& r = registry();
  // A descriptor noted on another thread reaches this one only through the caller's own
  // hand-over after cohort_buffer_tensor returned it, which orders the note before this load.
  if (r.live.load(std::memory_order_relaxed) == 0) return false;
  std::shared_lock lock(r.mutex);
  return r.descriptors.count(tensor) != 0;
}

}  // namespace cohort::capi
