#include "launch/output_stream.hpp"

#include "core/log.hpp"

#include <cerrno>
#include <cstring>

#include <unistd.h>

namespace cohort::launcher {

OutputStream::OutputStream(UniqueFd pipe, int terminal_fd, UniqueFd log_fd, std::string prefix,
                           std::size_t tail_lines)
    : pipe_(std::move(pipe)),
      echo_(terminal_fd >= 0 ? TerminalEcho::shared(terminal_fd) : nullptr),
      log_fd_(std::move(log_fd)),
      prefix_(std::move(prefix)),
      tail_lines_(tail_lines) {}

bool OutputStream::read_once() {
  char buffer[16 * 1024];
  const ssize_t n = ::read(pipe_.get(), buffer, sizeof buffer);
  if (n > 0) {
    if (log_fd_.valid() && !write_all(log_fd_.get(), buffer, static_cast<std::size_t>(n))) {
      COHORT_LOG_WARN("writing a rank log file failed ({}); continuing without it",
                      std::strerror(errno));
      log_fd_.reset();
    }
    pending_.append(buffer, static_cast<std::size_t>(n));
    emit_complete_lines();
    return true;
  }
  if (n < 0 && errno == EINTR) return true;
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return false;
  if (n < 0) COHORT_LOG_WARN("reading rank output failed: {}", std::strerror(errno));
  // End of file (or a broken pipe): nothing more will come.
  pipe_.reset();
  return false;
}

void OutputStream::read_available() {
  // Bounded so one chatty rank cannot starve the others' pipes (poll brings us back).
  for (int chunk = 0; chunk < 8 && pipe_.valid() && read_once(); ++chunk) {
  }
  if (!pipe_.valid()) finish();
}

void OutputStream::finish() {
  // What the exited writer left fits in the pipe buffer; the bound only stops a descendant
  // that keeps writing from holding us here.
  for (int chunk = 0; chunk < 256 && pipe_.valid() && read_once(); ++chunk) {
  }
  pipe_.reset();
  if (!pending_.empty()) {
    emit_line(pending_);
    pending_.clear();
  }
}

void OutputStream::emit_complete_lines() {
  std::size_t start = 0;
  for (;;) {
    const std::size_t newline = pending_.find('\n', start);
    if (newline == std::string::npos) break;
    emit_line(std::string_view(pending_).substr(start, newline - start));
    start = newline + 1;
  }
  pending_.erase(0, start);
  // A program printing a progress bar without newlines must not grow us without bound.
  while (pending_.size() >= kMaxLineBytes) {
    emit_line(std::string_view(pending_).substr(0, kMaxLineBytes));
    pending_.erase(0, kMaxLineBytes);
  }
}

void OutputStream::flush_terminal() {
  if (echo_) echo_->flush_ready();
}

void OutputStream::drain_terminal(std::chrono::milliseconds limit) {
  if (echo_) echo_->drain(limit);
}

void OutputStream::emit_line(std::string_view line) {
  if (echo_) {
    std::string tagged;
    tagged.reserve(prefix_.size() + line.size() + 1);
    tagged.append(prefix_).append(line).push_back('\n');
    echo_->write_line(std::move(tagged));
  }
  if (tail_lines_ > 0) {
    tail_.emplace_back(line);
    if (tail_.size() > tail_lines_) tail_.pop_front();
  }
}

}  // namespace cohort::launcher
