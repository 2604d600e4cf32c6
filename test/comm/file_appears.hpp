#pragma once

// Waiting for a file that another thread or process writes by rename (as the flight recorder
// does): inotify reports the rename, so the wait needs no sleeping and ends as soon as the file is
// there. Linux only; header-only, for the flight recorder's tests.

#include "support/poll_deadline.hpp"

#include <chrono>
#include <filesystem>
#include <stdexcept>
#include <string>

#include <poll.h>
#include <sys/inotify.h>
#include <unistd.h>

namespace cohort::test {

/// True once `path` exists; false when `timeout` passes first. Throws std::runtime_error when
/// its directory cannot be watched.
inline bool wait_for_file(const std::filesystem::path& path, std::chrono::milliseconds timeout) {
  const int fd = ::inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
  if (fd < 0) throw std::runtime_error("inotify_init1 failed");
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  // Watch first, then look: a file renamed in between is seen by the look.
  if (::inotify_add_watch(fd, path.parent_path().c_str(), IN_MOVED_TO | IN_CLOSE_WRITE) < 0)
    throw std::runtime_error("cannot watch " + path.parent_path().string());
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (std::filesystem::exists(path)) return true;
    pollfd pfd{fd, POLLIN, 0};
    const int ready = ::poll(&pfd, 1, poll_timeout_ms(deadline));
    if (ready == 0) return std::filesystem::exists(path);
    char events[4096];
    while (::read(fd, events, sizeof events) > 0) {
    }
  }
}

}  // namespace cohort::test
