#include "support/process_exit.hpp"

#include "support/poll_deadline.hpp"

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

#include <poll.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace cohort::test {

bool wait_for_exit(pid_t pid, std::chrono::milliseconds timeout) {
  // glibc 2.36 has a pidfd_open() wrapper, older ones do not: the system call works for both.
  const int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (fd < 0) {
    if (errno == ESRCH) return true;  // gone (and reaped) already
    throw std::runtime_error("pidfd_open(" + std::to_string(pid) + "): " + std::strerror(errno));
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    pollfd pfd{fd, POLLIN, 0};
    const int ready = ::poll(&pfd, 1, poll_timeout_ms(deadline));
    if (ready < 0 && errno == EINTR) continue;
    const int err = errno;
    ::close(fd);
    if (ready < 0) throw std::runtime_error(std::string("poll on a pidfd: ") + std::strerror(err));
    return ready > 0;
  }
}

}  // namespace cohort::test
