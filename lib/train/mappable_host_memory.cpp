#include "train/mappable_host_memory.hpp"

#include <cohort/error.hpp>

#include <atomic>

#include "core/log.hpp"

namespace cohort::train {

Buffer allocate_mappable_or_ordinary(std::size_t count, DType dtype, const char* what) {
  try {
    return Buffer::allocate_mappable(count, dtype);
  } catch (const Error& e) {
    if (e.code() != ErrorCode::SystemError) throw;
    static std::atomic<bool> told{false};
    if (!told.exchange(true))
      COHORT_LOG_INFO(
          "training layer: {} in ordinary memory, which peers copy instead of "
          "mapping: {}",
          what, e.what());
    return Buffer::allocate(count, dtype);
  }
}

}  // namespace cohort::train
