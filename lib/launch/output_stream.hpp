#pragma once

// One output pipe of one rank (its stdout or its stderr), drained by the launcher. Complete
// lines go to the terminal with an optional "[rank N] " prefix, through the terminal's shared
// echo (launch/terminal_echo.hpp: in order, whole lines, never blocking the launcher); the raw
// bytes also go to an optional per-rank log file; the last few lines are kept for the failure
// summary.

#include "launch/pipes.hpp"
#include "launch/terminal_echo.hpp"

#include <chrono>
#include <memory>

#include <cstddef>
#include <deque>
#include <string>
#include <vector>

namespace cohort::launcher {

class OutputStream {
 public:
  /// Longest line kept whole; a longer run without a newline is emitted in pieces of this size.
  static constexpr std::size_t kMaxLineBytes = 64 * 1024;

  /// `pipe` is the non-blocking read end. `terminal_fd` (not owned) gets tagged lines;
  /// `log_fd` (owned, may be invalid) gets the bytes exactly as read. `prefix` may be empty.
  OutputStream(UniqueFd pipe, int terminal_fd, UniqueFd log_fd, std::string prefix,
               std::size_t tail_lines);

  OutputStream(OutputStream&&) noexcept = default;
  OutputStream& operator=(OutputStream&&) noexcept = default;

  /// The pipe to poll, or -1 once closed.
  int fd() const noexcept { return pipe_.get(); }
  bool is_open() const noexcept { return pipe_.valid(); }

  /// Reads everything available now. At end of file, flushes and closes (see finish()).
  void read_available();
  /// Reads what is left without blocking (the writer has exited; a descendant that still holds
  /// the pipe cannot delay us), emits a final partial line with a newline, and closes.
  void finish();

  /// Echoes what the terminal takes now of the lines queued for it; never waits.
  void flush_terminal();
  /// Waits up to `limit` for the terminal to take the queued lines (the job's end).
  void drain_terminal(std::chrono::milliseconds limit);

  /// The last `tail_lines` lines seen (a final partial line included once finished).
  const std::deque<std::string>& tail() const noexcept { return tail_; }

 private:
  /// Returns false at end of file or on a read error.
  bool read_once();
  void emit_complete_lines();
  void emit_line(std::string_view line);

  UniqueFd pipe_;
  std::shared_ptr<TerminalEcho> echo_;  ///< null without a terminal
  UniqueFd log_fd_;
  std::string prefix_;
  std::size_t tail_lines_;
  std::string pending_;
  std::deque<std::string> tail_;
};

}  // namespace cohort::launcher
