#pragma once

// Pipes and descriptor helpers for the launcher. It juggles many pipes across fork(), so every
// descriptor lives in a UniqueFd and is closed exactly once.

#include "core/unique_fd.hpp"

#include <cstddef>

namespace cohort::launcher {

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

/// write_all() that never raises SIGPIPE: a reader that is gone makes it return false (errno
/// EPIPE) instead of killing the process under SIGPIPE's default action, which a library must
/// neither rely on nor change. SIGPIPE is blocked in the calling thread for the write, and the
/// one the write raised is taken back before the mask is restored (one pending from before is
/// left alone).
bool write_all_quietly(int fd, const char* data, std::size_t size) noexcept;

}  // namespace cohort::launcher
