#include "launch/pipes.hpp"

#include "core/log.hpp"
#include "core/system_error.hpp"

#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>
#include <ctime>

namespace cohort::launcher {

Pipe make_pipe() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw system_error("pipe2", errno);
  return Pipe{UniqueFd(fds[0]), UniqueFd(fds[1])};
}

void set_nonblocking(int fd) {
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) {
    throw system_error("fcntl(O_NONBLOCK) on fd " + std::to_string(fd), errno);
  }
}

UniqueFd open_dev_null() {
  const int fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw system_error("open(/dev/null)", errno);
  return UniqueFd(fd);
}

bool write_all(int fd, const char* data, std::size_t size) noexcept {
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

bool write_all_quietly(int fd, const char* data, std::size_t size) noexcept {
  sigset_t pipe_only;
  sigemptyset(&pipe_only);
  sigaddset(&pipe_only, SIGPIPE);
  sigset_t pending;
  sigemptyset(&pending);
  ::sigpending(&pending);
  const bool pending_before = sigismember(&pending, SIGPIPE) == 1;
  sigset_t previous;
  ::pthread_sigmask(SIG_BLOCK, &pipe_only, &previous);
  const bool written = write_all(fd, data, size);
  const int error = errno;
  if (!written && error == EPIPE && !pending_before) {
    // A write's SIGPIPE goes to the writing thread, where it now waits, blocked: take it.
    const timespec now{};
    while (::sigtimedwait(&pipe_only, nullptr, &now) < 0 && errno == EINTR) {
    }
  }
  ::pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  errno = error;
  return written;
}

}  // namespace cohort::launcher
