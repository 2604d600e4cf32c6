#include "transport/process_watch.hpp"

#include "core/log.hpp"
#include "core/pidfd.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

namespace cohort::transport {

ProcessWatch::ProcessWatch(pid_t pid) noexcept : pid_(pid), fd_(open_pidfd(pid).release()) {}

ProcessWatch::~ProcessWatch() {
  if (fd_ >= 0 && close(fd_) != 0) COHORT_LOG_WARN("closing a pidfd failed (errno {})", errno);
}

ProcessWatch::ProcessWatch(ProcessWatch&& other) noexcept
    : pid_(std::exchange(other.pid_, 0)), fd_(std::exchange(other.fd_, -1)) {}

ProcessWatch& ProcessWatch::operator=(ProcessWatch&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) close(fd_);
    pid_ = std::exchange(other.pid_, 0);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

bool ProcessWatch::alive() const noexcept {
  if (pid_ <= 0) return false;
  if (fd_ >= 0) {
    pollfd p{fd_, POLLIN, 0};
    for (;;) {
      const int ready = poll(&p, 1, 0);
      if (ready == 0) return true;
      // Readable: the process exited. A signal caught during the call (a profiler's, the
      // flight recorder's SIGUSR1) says nothing about the process: ask again.
      if (ready > 0 && (p.revents & POLLIN) != 0) return false;
      if (ready < 0 && errno == EINTR) continue;
      break;  // another error, or POLLNVAL: ask the other way
    }
  }
  // EPERM means it exists but belongs to someone else: still alive.
  return kill(pid_, 0) == 0 || errno != ESRCH;
}

}  // namespace cohort::transport
