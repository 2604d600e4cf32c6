#include "core/process_fence.hpp"

#include "core/log.hpp"

#include <atomic>
#include <cerrno>
#include <exception>
#include <system_error>
#include <thread>

#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace cohort {
namespace {

long membarrier(int command) noexcept {
  return ::syscall(SYS_membarrier, command, 0U, 0);
}

std::string errno_text(int err) {
  return std::error_code(err, std::generic_category()).message();
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
  // Registered per process: a forked child registers again. No lock: registering twice is
  // harmless, and a lock held across the system call (which may wait for an RCU grace period)
  // would be left held in a child forked meanwhile.
  static std::atomic<pid_t> registered_in{0};
  static std::atomic<bool> available{false};
  const pid_t me = ::getpid();
  if (registered_in.load(std::memory_order_acquire) == me)
    return available.load(std::memory_order_relaxed);
  const long commands = membarrier(MEMBARRIER_CMD_QUERY);
  const int query_errno = errno;
  bool ok = false;
  if (commands < 0) {
    COHORT_LOG_DEBUG("membarrier unavailable: {}", errno_text(query_errno));
  } else if ((commands & MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0) {
    COHORT_LOG_DEBUG("membarrier offers no private expedited command (commands {:#x})", commands);
  } else if (membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) != 0) {
    COHORT_LOG_DEBUG("membarrier registration refused: {}", errno_text(errno));
  } else {
    ok = true;
  }
  available.store(ok, std::memory_order_relaxed);
  registered_in.store(me, std::memory_order_release);
  return ok;
}

void process_fence() noexcept {
  // The kernel may be short of memory for a CPU mask (ENOMEM) for a moment: try again.
  for (int attempt = 0; attempt < 100; ++attempt) {
    if (membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0) return;
    if (errno != ENOMEM && errno != EINTR) break;
    std::this_thread::yield();
  }
  COHORT_LOG_ERROR("membarrier refused after registering: {}", errno_text(errno));
  std::terminate();
}

}  // namespace cohort
