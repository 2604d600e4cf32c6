#pragma once

// A move-only owner of one file descriptor. The launcher juggles many pipes across fork(), so
// every descriptor lives in one of these and is closed exactly once.

#include <utility>

namespace cohort::launcher {

class UniqueFd {
 public:
  UniqueFd() noexcept = default;
  explicit UniqueFd(int fd) noexcept : fd_(fd) {}
  ~UniqueFd() { reset(); }

  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) reset(other.release());
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;

  int get() const noexcept { return fd_; }
  bool valid() const noexcept { return fd_ >= 0; }
  explicit operator bool() const noexcept { return valid(); }

  /// Gives up ownership without closing.
  int release() noexcept { return std::exchange(fd_, -1); }
  /// Closes the current descriptor (a failing close is logged) and takes `fd`.
  void reset(int fd = -1) noexcept;

 private:
  int fd_ = -1;
};

/// Both ends of a pipe, created with O_CLOEXEC so no exec'd rank inherits the launcher's pipes.
struct Pipe {
  UniqueFd read;
  UniqueFd write;
};

/// pipe2(O_CLOEXEC); throws Error(SystemError) on failure.
Pipe make_pipe();

/// Sets O_NONBLOCK on `fd`; throws Error(SystemError) on failure.
void set_nonblocking(int fd);

/// Opens /dev/null for reading (O_CLOEXEC); throws Error(SystemError) on failure.
UniqueFd open_dev_null();

/// Writes all of `data` to `fd`, retrying on EINTR and short writes. Returns false when the
/// descriptor refuses (EPIPE, EBADF, ...): output sinks must never bring the launcher down.
bool write_all(int fd, const char* data, std::size_t size) noexcept;

}  // namespace cohort::launcher
