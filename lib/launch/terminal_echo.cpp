#include "launch/terminal_echo.hpp"

#include <fmt/format.h>

#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <map>
#include <utility>

namespace cohort::launcher {
namespace {

/// The most one write to `fd` carries when poll() said it is writable, so that the write cannot
/// block. A pipe with room takes any write of up to PIPE_BUF whole; a regular file never waits
/// on a reader. A terminal (or socket) reports writable with only some room left (a tty: fewer
/// than 256 characters waiting), so writes there stay that small.
std::size_t safe_chunk(int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return 256;
  if (S_ISREG(st.st_mode)) return std::size_t{1} << 20;
  if (S_ISFIFO(st.st_mode)) return PIPE_BUF;
  return 256;
}

bool writable_now(int fd) {
  pollfd p{fd, POLLOUT, 0};
  for (;;) {
    const int ready = ::poll(&p, 1, 0);
    if (ready < 0 && errno == EINTR) continue;
    return ready > 0 && (p.revents & POLLOUT) != 0;
  }
}

}  // namespace

TerminalEcho::TerminalEcho(int fd) : fd_(fd), chunk_(safe_chunk(fd)) {}

std::shared_ptr<TerminalEcho> TerminalEcho::shared(int fd) {
  static std::map<int, std::weak_ptr<TerminalEcho>> echoes;
  std::shared_ptr<TerminalEcho> echo = echoes[fd].lock();
  if (!echo) {
    echo = std::make_shared<TerminalEcho>(fd);
    echoes[fd] = echo;
  }
  return echo;
}

void TerminalEcho::write_line(std::string line) {
  if (broken_ || line.empty()) return;
  queued_bytes_ += line.size();
  queue_.push_back(std::move(line));
  // Over the bound: drop the oldest lines not yet begun (a begun one must end, or the next
  // would be glued to its first half), never the one just queued.
  const std::size_t first_droppable = front_offset_ > 0 ? 1 : 0;
  while (queued_bytes_ > kMaxQueuedBytes && queue_.size() > first_droppable + 1) {
    const auto victim = queue_.begin() + static_cast<std::ptrdiff_t>(first_droppable);
    queued_bytes_ -= victim->size();
    queue_.erase(victim);
    ++dropped_unreported_;
    ++dropped_total_;
  }
  flush_ready();
}

void TerminalEcho::flush_ready() {
  if (!broken_ && (!queue_.empty() || dropped_unreported_ > 0 || !note_.empty())) write_ready();
}

void TerminalEcho::drain(std::chrono::milliseconds limit) {
  const auto give_up = std::chrono::steady_clock::now() + limit;
  while (!broken_ && (!queue_.empty() || dropped_unreported_ > 0 || !note_.empty())) {
    if (write_ready()) continue;
    const auto left =
        std::chrono::ceil<std::chrono::milliseconds>(give_up - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    pollfd p{fd_, POLLOUT, 0};
    if (::poll(&p, 1, static_cast<int>(std::min<long long>(left.count(), 50))) < 0 &&
        errno != EINTR)
      break;
  }
  dropped_total_ += queue_.size();
  discard_queue();
}

bool TerminalEcho::write_ready() {
  while (!broken_) {
    if (!note_.empty()) {
      if (!write_some(note_, note_offset_)) return false;
      if (note_offset_ == note_.size()) {
        note_.clear();
        note_offset_ = 0;
      }
      continue;
    }
    // The count goes between whole lines, where the dropped ones were, once the terminal
    // takes output again (formed earlier, it would miss the lines dropped meanwhile).
    if (dropped_unreported_ > 0 && front_offset_ == 0) {
      if (!writable_now(fd_)) return false;
      note_ = fmt::format(
          "[cohort-run: {} lines of rank output not shown: the terminal did not "
          "take them]\n",
          dropped_unreported_);
      dropped_unreported_ = 0;
      continue;
    }
    if (queue_.empty()) return true;
    const std::size_t before = front_offset_;
    if (!write_some(queue_.front(), front_offset_)) return false;
    queued_bytes_ -= front_offset_ - before;
    if (front_offset_ == queue_.front().size()) {
      queue_.pop_front();
      front_offset_ = 0;
    }
  }
  return false;
}

bool TerminalEcho::write_some(const std::string& text, std::size_t& offset) {
  if (!writable_now(fd_)) return false;
  const std::size_t size = std::min(chunk_, text.size() - offset);
  const ssize_t n = ::write(fd_, text.data() + offset, size);
  if (n < 0) {
    if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) return false;
    broken_ = true;  // a closed terminal must not stop the job: keep draining, stop echoing
    discard_queue();
    return false;
  }
  offset += static_cast<std::size_t>(n);
  return true;
}

void TerminalEcho::discard_queue() noexcept {
  queue_.clear();
  queued_bytes_ = 0;
  front_offset_ = 0;
  note_.clear();
  note_offset_ = 0;
}

}  // namespace cohort::launcher
