#include "support/forked_child.hpp"

#include "support/process_exit.hpp"

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <exception>
#include <stdexcept>
#include <string>
#include <utility>

#include <sys/wait.h>
#include <unistd.h>

namespace cohort::test {
namespace {

void kill_and_reap(pid_t pid) {
  ::kill(pid, SIGKILL);
  while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
  }
}

}  // namespace

ForkedChild::ForkedChild(const std::function<int()>& body) {
  std::fflush(nullptr);  // or the child would flush the parent's buffered output a second time
  pid_ = ::fork();
  if (pid_ < 0) throw std::runtime_error("fork failed");
  if (pid_ == 0) {
    int code = 1;
    try {
      code = body();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "forked child %d failed: %s\n", static_cast<int>(::getpid()), e.what());
    }
    std::fflush(nullptr);
    ::_exit(code);
  }
}

ForkedChild::ForkedChild(ForkedChild&& other) noexcept : pid_(std::exchange(other.pid_, -1)) {}

ForkedChild::~ForkedChild() {
  if (pid_ > 0) kill_and_reap(pid_);
}

int ForkedChild::join(std::chrono::milliseconds timeout) {
  if (pid_ <= 0) throw std::logic_error("ForkedChild::join: no child (joined or killed already)");
  if (!wait_for_exit(pid_, timeout))
    throw std::runtime_error("forked child " + std::to_string(pid_) +
                             " still running at the deadline");
  int status = 0;
  while (::waitpid(pid_, &status, 0) < 0) {
    if (errno != EINTR) throw std::runtime_error("waitpid on forked child failed");
  }
  pid_ = -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
}

void ForkedChild::kill() {
  if (pid_ <= 0) return;
  kill_and_reap(pid_);
  pid_ = -1;
}

}  // namespace cohort::test
