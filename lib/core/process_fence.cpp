#include "core/process_fence.hpp"

#include "core/log.hpp"

#include <cerrno>
#include <cstring>
#include <exception>
#include <mutex>

#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace cohort {
namespace {

long membarrier(int command) noexcept {
  return ::syscall(SYS_membarrier, command, 0U, 0);
}

}  // namespace

bool process_fence_available() noexcept {
#if defined(__SANITIZE_THREAD__)
  return false;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
  return false;
#endif
#endif
  // Registered per process: a forked child registers again.
  static std::mutex mutex;
  static pid_t registered_in = 0;
  static bool available = false;
  std::lock_guard lock(mutex);
  const pid_t me = ::getpid();
  if (registered_in == me) return available;
  registered_in = me;
  const long commands = membarrier(MEMBARRIER_CMD_QUERY);
  available = commands >= 0 && (commands & MEMBARRIER_CMD_PRIVATE_EXPEDITED) != 0 &&
              membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0;
  if (!available)
    COHORT_LOG_DEBUG("membarrier (private expedited) unavailable: {}", std::strerror(errno));
  return available;
}

void process_fence() noexcept {
  if (membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0) return;
  COHORT_LOG_ERROR("membarrier refused after registering: {}", std::strerror(errno));
  std::terminate();
}

}  // namespace cohort
