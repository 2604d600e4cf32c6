#pragma once

// A process's pidfd: a descriptor that names one process for as long as it is open, so waiting
// on it or polling it can never reach another process that was given the same pid later.

#include "core/unique_fd.hpp"

#include <cerrno>

#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

namespace cohort {

/// pidfd_open(pid): readable once the process has exited; for a child of the caller,
/// waitid(P_PIDFD) reaps exactly that child. Invalid (errno set) on kernels before 5.3 or if
/// `pid` is gone. A child the caller has not reaped yet cannot be gone, so its pidfd always
/// names it.
inline UniqueFd open_pidfd(pid_t pid) noexcept {
#ifdef SYS_pidfd_open
  return UniqueFd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
#else
  (void)pid;
  errno = ENOSYS;
  return UniqueFd();
#endif
}

}  // namespace cohort
