#include "transport/shared_segment.hpp"

#include "core/log.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

namespace cohort::transport::shared_segment {

int create(const char* name, const char* what) noexcept {
  const int fd = memfd_create(name, MFD_CLOEXEC);
  if (fd < 0) COHORT_LOG_DEBUG("{}: memfd_create failed (errno {})", what, errno);
  return fd;
}

void* size_and_map(int fd, std::size_t bytes, const char* what) noexcept {
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    COHORT_LOG_DEBUG("{}: sizing the segment to {} bytes failed (errno {})", what, bytes, errno);
    return nullptr;
  }
  void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    COHORT_LOG_DEBUG("{}: mapping {} bytes failed (errno {})", what, bytes, errno);
    return nullptr;
  }
  return base;
}

std::string proc_path(pid_t pid, int fd) {
  return "/proc/" + std::to_string(pid) + "/fd/" + std::to_string(fd);
}

void* map_existing(const std::string& where, std::size_t bytes, const char* what) noexcept {
  const int fd = open(where.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    COHORT_LOG_DEBUG("{}: opening {} failed (errno {})", what, where, errno);
    return nullptr;
  }
  struct stat status {};
  void* base = nullptr;
  if (fstat(fd, &status) != 0 || static_cast<std::size_t>(status.st_size) < bytes) {
    COHORT_LOG_DEBUG("{}: {} is smaller than the {} bytes expected", what, where, bytes);
  } else if (base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
             base == MAP_FAILED) {
    COHORT_LOG_DEBUG("{}: mapping {} failed (errno {})", what, where, errno);
    base = nullptr;
  }
  close(fd);
  return base;
}

}  // namespace cohort::transport::shared_segment
