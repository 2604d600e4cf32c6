#include "core/unique_fd.hpp"

#include "core/log.hpp"

#include <cerrno>
#include <cstring>

#include <unistd.h>

namespace cohort {

void UniqueFd::reset(int fd) noexcept {
  // Linux releases the descriptor even when close() fails (EINTR included), so never retry;
  // only errors other than EINTR are worth a word.
  if (fd_ >= 0 && ::close(fd_) != 0 && errno != EINTR)
    COHORT_LOG_WARN("close(fd {}) failed: {}", fd_, std::strerror(errno));
  fd_ = fd;
}

}  // namespace cohort
