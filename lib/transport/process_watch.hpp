#pragma once

// Watches another process on this host for exit: a pidfd (readable once the process has exited,
// so it can sit in the same poll() as the UCX event fd) or, on kernels without pidfd_open,
// kill(pid, 0) checks.

#include <sys/types.h>

namespace cohort::transport {

class ProcessWatch {
 public:
  ProcessWatch() = default;
  explicit ProcessWatch(pid_t pid) noexcept;
  ~ProcessWatch();
  ProcessWatch(ProcessWatch&& other) noexcept;
  ProcessWatch& operator=(ProcessWatch&& other) noexcept;
  ProcessWatch(const ProcessWatch&) = delete;
  ProcessWatch& operator=(const ProcessWatch&) = delete;

  /// False once the process has exited (or was never there).
  bool alive() const noexcept;
  /// The pidfd to poll for POLLIN, or -1 when only alive() can tell.
  int fd() const noexcept { return fd_; }
  bool watching() const noexcept { return pid_ > 0; }
  /// The watched process (0 for an empty watch).
  pid_t pid() const noexcept { return pid_; }

 private:
  pid_t pid_ = 0;
  int fd_ = -1;
};

}  // namespace cohort::transport
