#pragma once

// The launcher's echo of rank output to its own stdout or stderr, which never blocks the
// launcher. Whatever reads the terminal may stop reading without closing it (an ssh session
// whose client went to sleep, a pager, a terminal paused with Ctrl-S); a blocking write there
// would stop the supervisor with it: no rank reaped, no timeout, no Ctrl-C, and the ranks
// themselves blocked on their full output pipes. So lines are queued, written only as far as
// the descriptor takes them without waiting (poll, then at most what it is sure to take), and
// past a bound the oldest queued lines are dropped, counted, and the count is echoed once the
// terminal takes output again. The descriptor itself is shared with the shell and is left
// blocking (O_NONBLOCK on it would change it for them too): a terminal or pipe is opened once
// more through /proc/self/fd, a description of our own that is non-blocking, so a write takes
// what fits and returns. Where that cannot be done (a socket), each write waits for poll() and
// carries at most PIPE_BUF bytes, which a pipe with room takes whole.

#include <chrono>
#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
#include <string>

namespace cohort::launcher {

class TerminalEcho {
 public:
  /// Bytes queued at most; beyond them the oldest whole lines are dropped.
  static constexpr std::size_t kMaxQueuedBytes = std::size_t{4} << 20;

  /// `fd` is not owned (a non-blocking description of its file is, when one can be opened).
  explicit TerminalEcho(int fd);
  ~TerminalEcho();
  TerminalEcho(const TerminalEcho&) = delete;
  TerminalEcho& operator=(const TerminalEcho&) = delete;

  /// The echo of the file `fd` writes to, shared by every stream writing there (stdout and
  /// stderr are often one terminal), so their lines keep one order and one bound.
  /// Thread-safe, as is every member: the supervisor's loop echoes rank output while other
  /// threads (node 0's store server, the store watch) may log through the same echo.
  static std::shared_ptr<TerminalEcho> shared(int fd);

  /// Queues one complete line (its newline included) and writes what the descriptor takes now.
  void write_line(std::string line);
  /// Writes what the descriptor takes now; never waits.
  void flush_ready();
  /// Whether the descriptor refused for good (a closed pipe or terminal): nothing more is echoed.
  bool broken() const;
  /// Waits up to `limit` in all for the descriptor to take what is queued (the job's end); what
  /// is left then is dropped. Once a drain has given up, later ones do not wait again: the
  /// terminal was already shown to be stalled, and the job's end must not pay the bound twice.
  /// Other threads' lines are taken meanwhile (the lock is not held while waiting).
  void drain(std::chrono::milliseconds limit);

  std::size_t queued_bytes() const;
  std::size_t dropped_lines() const;

 private:
  // Everything below runs with mutex_ held.
  bool pending() const noexcept {
    return !queue_.empty() || dropped_unreported_ > 0 || !note_.empty();
  }
  void flush_locked();
  /// Writes the note and the queue while the descriptor is ready; false when it stopped taking.
  bool write_ready();
  /// One write of at most chunk_ bytes of `text` from `offset` (advanced); false when nothing
  /// could go now.
  bool write_some(const std::string& text, std::size_t& offset);
  /// Forgets everything queued (the descriptor refused, or the job's end gave up on it).
  void discard_queue() noexcept;

  mutable std::mutex mutex_;
  int fd_;             ///< what is written to: own_fd_ when open, else the caller's
  int own_fd_ = -1;    ///< the non-blocking description of our own, or -1
  std::size_t chunk_;  ///< the most one write may carry without blocking
  std::deque<std::string> queue_;
  std::size_t front_offset_ = 0;  ///< bytes of the front line already written
  std::size_t queued_bytes_ = 0;  ///< unwritten bytes in queue_
  std::size_t dropped_unreported_ = 0;
  /// The count of dropped lines being echoed, kept out of queue_ so no bound ever drops it.
  std::string note_;
  std::size_t note_offset_ = 0;
  std::size_t dropped_total_ = 0;
  bool broken_ = false;   ///< the descriptor refused (closed pipe, bad fd): echo no more
  bool gave_up_ = false;  ///< a drain ran out of its bound
};

}  // namespace cohort::launcher
