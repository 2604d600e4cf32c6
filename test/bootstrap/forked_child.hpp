#pragma once

// Test support: run a function in a fork()ed child and collect its exit status. The child never
// returns into Catch2: it _exit()s with the function's result (1 and a message on stderr when
// it throws). A ForkedChild that is never joined is killed and reaped by its destructor, so a
// failing test leaves no stray processes. Fork only while the parent has no other threads.

#include <cohort/error.hpp>

#include <sys/wait.h>
#include <unistd.h>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <functional>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>

namespace cohort::test {

class ForkedChild {
 public:
  explicit ForkedChild(const std::function<int()>& body) {
    std::fflush(nullptr);
    pid_ = ::fork();
    if (pid_ < 0) throw std::runtime_error("fork failed");
    if (pid_ == 0) {
      int code = 1;
      try {
        code = body();
      } catch (const std::exception& e) {
        std::fprintf(stderr, "forked child %d failed: %s\n", static_cast<int>(::getpid()),
                     e.what());
      }
      std::fflush(nullptr);
      ::_exit(code);
    }
  }
  ForkedChild(ForkedChild&& other) noexcept : pid_(std::exchange(other.pid_, -1)) {}
  ForkedChild& operator=(ForkedChild&&) = delete;
  ForkedChild(const ForkedChild&) = delete;
  ~ForkedChild() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }

  pid_t pid() const { return pid_; }

  /// Waits up to `timeout` for the child; returns its exit code, or -signal, or throws when it
  /// is still running at the deadline (it is then killed).
  int join(std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      int status = 0;
      const pid_t done = ::waitpid(pid_, &status, WNOHANG);
      if (done == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
      }
      if (std::chrono::steady_clock::now() >= deadline)
        throw std::runtime_error("forked child " + std::to_string(pid_) +
                                 " still running at the deadline");
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }

  /// SIGKILLs the child and reaps it.
  void kill() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

 private:
  pid_t pid_ = -1;
};

}  // namespace cohort::test
