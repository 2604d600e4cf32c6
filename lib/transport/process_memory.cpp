#include "transport/process_memory.hpp"

#include <sys/random.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>

namespace cohort::transport {

ssize_t read_process_once(pid_t pid, void* into, const void* from, std::size_t bytes) noexcept {
  iovec local{into, bytes};
  iovec remote{const_cast<void*>(from), bytes};
  return process_vm_readv(pid, &local, 1, &remote, 1, 0);
}

int read_process_memory(pid_t pid, void* into, const void* from, std::size_t bytes) noexcept {
  auto* to = static_cast<std::byte*>(into);
  const auto* at = static_cast<const std::byte*>(from);
  while (bytes > 0) {
    const ssize_t got = read_process_once(pid, to, at, bytes);
    if (got <= 0) {
      const int error = got < 0 ? errno : EFAULT;
      if (error == EINTR) continue;
      return error;
    }
    to += got;
    at += got;
    bytes -= static_cast<std::size_t>(got);
  }
  return 0;
}

int check_probe(pid_t pid, std::uint64_t at, std::uint64_t expected) noexcept {
  std::uint64_t seen = 0;
  const ssize_t got = read_process_once(
      pid, &seen, reinterpret_cast<const void*>(static_cast<std::uintptr_t>(at)), sizeof seen);
  if (got < 0) return errno;
  return got == static_cast<ssize_t>(sizeof seen) && seen == expected ? 0 : -1;
}

std::uint64_t random_probe() noexcept {
  std::uint64_t value = 0;
  if (getrandom(&value, sizeof value, GRND_NONBLOCK) != static_cast<ssize_t>(sizeof value)) {
    const auto now = std::chrono::steady_clock::now().time_since_epoch().count();
    value = static_cast<std::uint64_t>(now) * 0x9e3779b97f4a7c15ULL ^
            static_cast<std::uint64_t>(getpid());
  }
  return value | 1;  // never 0
}

}  // namespace cohort::transport
