#include "transport/process_memory.hpp"

#include <sys/random.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstring>

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

int read_sealed_process_memory(pid_t pid, void* into, const void* from, std::size_t bytes,
                               std::uint64_t seal_at, std::uint64_t seal,
                               [[maybe_unused]] std::uint64_t tail) noexcept {
  const auto* seal_word = reinterpret_cast<const void*>(static_cast<std::uintptr_t>(seal_at));
  std::uint64_t seen = 0;
  std::size_t done = 0;
  // A standing send's seal word is always there (seal words are never freed), so a seal that
  // cannot be read means a bogus announcement, or a process that took a dead sender's pid:
  // either way not the sender's bytes.
  const auto read_seal = [&](std::uint64_t& now) {
    const int error = read_process_memory(pid, &now, seal_word, sizeof now);
    return error == EFAULT ? ECANCELED : error;
  };
  // A read that failed may have met a buffer freed after its send was withdrawn: the seal says
  // which, so the receive names the cancelled send rather than a bad address.
  const auto withdrawn_or = [&](int error) {
    std::uint64_t now = 0;
    const int seal_error = read_seal(now);
    return seal_error == ECANCELED || (seal_error == 0 && now != seal) ? ECANCELED : error;
  };
#if defined(__x86_64__) || defined(__i386__)
  // The kernel reads the remote iovecs in array order (process_vm_readv(2)), and x86 keeps loads
  // in order, so the seal's load follows every byte's. Elsewhere loads may pass one another, and
  // the seal is read in a second call after a fence. One local iovec: the seal lands where the
  // message's last 8 bytes go, and the announced tail goes back over it. With a second local
  // iovec for the seal the kernel copies through its general iovec path, about 1.3 us slower
  // per 512 KiB-1 MiB and 5-8 us per 4 MiB (a test program reading its own memory, Linux 6.18),
  // and a call of its own for the seal costs 1.7-2.4 us.
  if (bytes >= sizeof seen) {
    auto* const to = static_cast<std::byte*>(into);
    const std::size_t head = bytes - sizeof seen;
    iovec local{into, bytes};
    iovec remote[2] = {{const_cast<void*>(from), head},
                       {const_cast<void*>(seal_word), sizeof seen}};
    const ssize_t got = process_vm_readv(pid, &local, 1, remote, 2, 0);
    if (got < 0 && errno != EINTR) return withdrawn_or(errno);
    if (got == static_cast<ssize_t>(bytes)) {
      std::memcpy(&seen, to + head, sizeof seen);
      std::memcpy(to + head, &tail, sizeof tail);
      return seen == seal ? 0 : ECANCELED;
    }
    // Stopped short (a page it could not pin): the rest of the bytes, then the seal, below.
    done = got > 0 ? std::min(static_cast<std::size_t>(got), head) : 0;
  }
#endif
  if (done < bytes) {
    const int error = read_process_memory(pid, static_cast<std::byte*>(into) + done,
                                          static_cast<const std::byte*>(from) + done, bytes - done);
    if (error != 0) return withdrawn_or(error);
  }
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (const int error = read_seal(seen); error != 0) return error;
  return seen == seal ? 0 : ECANCELED;
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
