#pragma once

// A pipe that carries small notes between processes forked after it was made (or between
// threads): how one party waits until another has reached a point, instead of sleeping and
// hoping. A note is one 8-byte value written with a single write(), which POSIX makes atomic
// (below PIPE_BUF), so several writers may share one pipe and the reader takes whole notes.

#include <chrono>
#include <cstdint>

namespace cohort::test {

class SyncPipe {
 public:
  /// Throws std::runtime_error when the pipe cannot be made.
  SyncPipe();
  ~SyncPipe();
  SyncPipe(const SyncPipe&) = delete;
  SyncPipe& operator=(const SyncPipe&) = delete;

  /// Writes one note. Throws std::runtime_error when the write fails.
  void post(std::uint64_t value = 0);
  /// Reads the next note, waiting for it. Throws std::runtime_error when none arrives within
  /// `timeout`.
  std::uint64_t take(std::chrono::milliseconds timeout);

 private:
  int read_fd_ = -1;
  int write_fd_ = -1;
};

}  // namespace cohort::test
