#include "launch/terminal_echo.hpp"

#include <fmt/format.h>

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <map>
#include <mutex>
#include <string>
#include <utility>

namespace cohort::launcher {
namespace {

/// A non-blocking description of our own of the terminal or pipe `fd` writes to, or -1 (a
/// regular file needs none: it never waits on a reader; a socket cannot be opened this way).
int open_nonblocking(int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !(S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode))) return -1;
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  return ::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
}

/// Whether a write to `fd` may go now: it has room, or it has failed for good (the write then
/// fails at once and says how).
bool writable_now(int fd) {
  pollfd p{fd, POLLOUT, 0};
  for (;;) {
    const int ready = ::poll(&p, 1, 0);
    if (ready < 0 && errno == EINTR) continue;
    return ready > 0 && (p.revents & (POLLOUT | POLLERR | POLLHUP | POLLNVAL)) != 0;
  }
}

/// The file `fd` writes to, so that two descriptors of one terminal share one echo.
std::string file_identity(int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return "fd " + std::to_string(fd);
  return fmt::format("{}:{}:{}", st.st_dev, st.st_ino, st.st_rdev);
}

}  // namespace

TerminalEcho::TerminalEcho(int fd) : fd_(fd), own_fd_(open_nonblocking(fd)) {
  if (own_fd_ >= 0) fd_ = own_fd_;
  struct stat st {};
  const bool regular = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
  // Our own non-blocking description takes any size (what fits goes); a regular file never
  // waits; otherwise a write after poll() carries at most PIPE_BUF.
  chunk_ = own_fd_ >= 0 || regular ? std::size_t{1} << 20 : PIPE_BUF;
}

TerminalEcho::~TerminalEcho() {
  if (own_fd_ >= 0) ::close(own_fd_);
}

std::shared_ptr<TerminalEcho> TerminalEcho::shared(int fd) {
  static std::mutex registry_mutex;
  static std::map<std::string, std::weak_ptr<TerminalEcho>> echoes;
  std::lock_guard lock(registry_mutex);
  const std::string identity = file_identity(fd);
  std::shared_ptr<TerminalEcho> echo = echoes[identity].lock();
  if (!echo) {
    echo = std::make_shared<TerminalEcho>(fd);
    echoes[identity] = echo;
  }
  return echo;
}

void TerminalEcho::write_line(std::string line) {
  std::lock_guard lock(mutex_);
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
  flush_locked();
}

void TerminalEcho::flush_ready() {
  std::lock_guard lock(mutex_);
  flush_locked();
}

void TerminalEcho::flush_locked() {
  if (!broken_ && pending()) write_ready();
}

bool TerminalEcho::broken() const {
  std::lock_guard lock(mutex_);
  return broken_;
}

std::size_t TerminalEcho::queued_bytes() const {
  std::lock_guard lock(mutex_);
  return queued_bytes_;
}

std::size_t TerminalEcho::dropped_lines() const {
  std::lock_guard lock(mutex_);
  return dropped_total_;
}

void TerminalEcho::drain(std::chrono::milliseconds limit) {
  std::unique_lock lock(mutex_);
  if (gave_up_) limit = std::chrono::milliseconds(0);
  const auto give_up = std::chrono::steady_clock::now() + limit;
  while (!broken_ && pending()) {
    if (write_ready()) continue;
    const auto left =
        std::chrono::ceil<std::chrono::milliseconds>(give_up - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    // Other threads may queue lines meanwhile (they go out with the rest).
    const int fd = fd_;
    lock.unlock();
    pollfd p{fd, POLLOUT, 0};
    const bool failed =
        ::poll(&p, 1, static_cast<int>(std::min<long long>(left.count(), 50))) < 0 &&
        errno != EINTR;
    lock.lock();
    if (failed) break;
  }
  if (!queue_.empty() || !note_.empty()) gave_up_ = true;
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
  if (own_fd_ < 0 && !writable_now(fd_)) return false;
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
