#pragma once

// The launcher's echo of rank output to its own stdout or stderr, which never blocks the
// launcher. Whatever reads the terminal may stop reading without closing it (an ssh session
// whose client went to sleep, a pager, a terminal paused with Ctrl-S); a blocking write there
// would stop the supervisor with it: no rank reaped, no timeout, no Ctrl-C, and the ranks
// themselves blocked on their full output pipes. So lines are queued, written only as far as
// the descriptor takes them without waiting (poll, then at most what it is sure to take), and
// past a bound the oldest queued lines are dropped, counted, and the count is echoed once the
// terminal takes output again. The descriptor itself is shared with the shell and is left
// blocking: setting O_NONBLOCK on it would change it for them too.

#include <chrono>
#include <cstddef>
#include <deque>
#include <memory>
#include <string>

namespace cohort::launcher {

class TerminalEcho {
 public:
  /// Bytes queued at most; beyond them the oldest whole lines are dropped.
  static constexpr std::size_t kMaxQueuedBytes = std::size_t{4} << 20;

  /// `fd` is not owned.
  explicit TerminalEcho(int fd);

  /// The echo of `fd` shared by every stream writing there, so their lines keep one order and
  /// one bound. Not thread-safe (the launcher is single-threaded).
  static std::shared_ptr<TerminalEcho> shared(int fd);

  /// Queues one complete line (its newline included) and writes what the descriptor takes now.
  void write_line(std::string line);
  /// Writes what the descriptor takes now; never waits.
  void flush_ready();
  /// Waits up to `limit` in all for the descriptor to take what is queued (the job's end); what
  /// is left then is dropped.
  void drain(std::chrono::milliseconds limit);

  std::size_t queued_bytes() const noexcept { return queued_bytes_; }
  std::size_t dropped_lines() const noexcept { return dropped_total_; }

 private:
  /// Writes the note and the queue while the descriptor is ready; false when it stopped taking.
  bool write_ready();
  /// One write of at most chunk_ bytes of `text` from `offset` (advanced); false when nothing
  /// could go now.
  bool write_some(const std::string& text, std::size_t& offset);
  /// Forgets everything queued (the descriptor refused, or the job's end gave up on it).
  void discard_queue() noexcept;

  int fd_;
  std::size_t chunk_;  ///< the most one write may carry without blocking (see the constructor)
  std::deque<std::string> queue_;
  std::size_t front_offset_ = 0;  ///< bytes of the front line already written
  std::size_t queued_bytes_ = 0;  ///< unwritten bytes in queue_
  std::size_t dropped_unreported_ = 0;
  /// The count of dropped lines being echoed, kept out of queue_ so no bound ever drops it.
  std::string note_;
  std::size_t note_offset_ = 0;
  std::size_t dropped_total_ = 0;
  bool broken_ = false;  ///< the descriptor refused (closed pipe, bad fd): echo no more
};

}  // namespace cohort::launcher
