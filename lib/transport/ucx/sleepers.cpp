#include "transport/ucx/sleepers.hpp"

#include "core/log.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>

namespace cohort::transport::ucx {
namespace {

/// One per thread that ever slept in a hub's wait, in the process that made it.
struct ThreadBell {
  int fd = -1;
  pid_t owner = 0;  ///< the process whose descriptor it is: a forked child inherits the parent's
  ~ThreadBell() {
    if (fd >= 0) close(fd);
    fd = -1;  // a wait in a later destructor on this thread makes a new one, not reuse the number
  }
};

thread_local ThreadBell bell;
std::atomic<bool> refusal_logged{false};

}  // namespace

int Sleepers::own_drained_fd() noexcept {
  const pid_t me = getpid();
  if (bell.fd >= 0 && bell.owner != me) {
    // Inherited across fork(): the same kernel object as the parent thread's, which a write
    // there would wake and a drain here would rob. The child's copy is closed, not the parent's.
    close(bell.fd);
    bell.fd = -1;
  }
  if (bell.fd < 0) {
    bell.fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    bell.owner = me;
    if (bell.fd < 0) {
      if (!refusal_logged.exchange(true))
        COHORT_LOG_WARN(
            "no eventfd for a thread sleeping in the transport (errno {}): it naps "
            "briefly instead of waiting to be woken",
            errno);
      return -1;
    }
  }
  std::uint64_t count = 0;
  if (read(bell.fd, &count, sizeof count) < 0 && errno != EAGAIN)
    COHORT_LOG_WARN("draining a sleeper's eventfd failed (errno {})", errno);
  return bell.fd;
}

void Sleepers::add(int fd) {
  std::lock_guard lock(mutex_);
  fds_.push_back(fd);
  count_.fetch_add(1, std::memory_order_release);
}

void Sleepers::remove(int fd) noexcept {
  std::lock_guard lock(mutex_);
  const auto it = std::find(fds_.begin(), fds_.end(), fd);
  if (it == fds_.end()) return;
  fds_.erase(it);
  count_.fetch_sub(1, std::memory_order_release);
}

void Sleepers::wake_all() noexcept {
  const std::uint64_t one = 1;
  std::lock_guard lock(mutex_);
  for (int fd : fds_)
    if (write(fd, &one, sizeof one) < 0 && errno != EAGAIN)
      COHORT_LOG_WARN("waking a thread asleep in the transport failed (errno {})", errno);
}

}  // namespace cohort::transport::ucx
