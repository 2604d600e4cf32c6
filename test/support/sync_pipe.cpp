#include "support/sync_pipe.hpp"

#include "support/poll_deadline.hpp"

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

namespace cohort::test {

SyncPipe::SyncPipe() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0)
    throw std::runtime_error(std::string("pipe2: ") + std::strerror(errno));
  read_fd_ = fds[0];
  write_fd_ = fds[1];
}

SyncPipe::~SyncPipe() {
  ::close(read_fd_);
  ::close(write_fd_);
}

void SyncPipe::post(std::uint64_t value) {
  for (;;) {
    const ssize_t written = ::write(write_fd_, &value, sizeof value);
    if (written == static_cast<ssize_t>(sizeof value)) return;
    if (written < 0 && errno == EINTR) continue;
    throw std::runtime_error(std::string("SyncPipe: write failed: ") +
                             (written < 0 ? std::strerror(errno) : "short write"));
  }
}

std::uint64_t SyncPipe::take(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    pollfd pfd{read_fd_, POLLIN, 0};
    const int ready = ::poll(&pfd, 1, poll_timeout_ms(deadline));
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) throw std::runtime_error(std::string("SyncPipe: poll: ") + std::strerror(errno));
    if (ready == 0)
      throw std::runtime_error("SyncPipe: no note arrived within " +
                               std::to_string(timeout.count()) + " ms");
    std::uint64_t value = 0;
    const ssize_t got = ::read(read_fd_, &value, sizeof value);
    if (got < 0 && errno == EINTR) continue;
    // Notes are written whole, so a read gets a whole note or fails.
    if (got != static_cast<ssize_t>(sizeof value))
      throw std::runtime_error(std::string("SyncPipe: read failed: ") +
                               (got < 0 ? std::strerror(errno) : "short read"));
    return value;
  }
}

}  // namespace cohort::test
