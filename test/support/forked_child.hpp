#pragma once

// Runs a function in a fork()ed child and collects its exit status. The child never returns into
// Catch2: it _exit()s with the function's result (1 and a message on stderr when it throws). A
// ForkedChild that is never joined is killed and reaped by its destructor, so a failing test
// leaves no stray processes. Fork only while the parent has no other threads.

#include <chrono>
#include <functional>

#include <sys/types.h>

namespace cohort::test {

class ForkedChild {
 public:
  /// Forks; the child runs `body` and exits with its result. Throws std::runtime_error when
  /// fork() fails.
  explicit ForkedChild(const std::function<int()>& body);
  ForkedChild(ForkedChild&& other) noexcept;
  ForkedChild& operator=(ForkedChild&&) = delete;
  ForkedChild(const ForkedChild&) = delete;
  ~ForkedChild();

  pid_t pid() const { return pid_; }

  /// Waits up to `timeout` for the child to exit and reaps it; returns its exit code, or
  /// -signal when a signal killed it. Throws std::runtime_error when it is still running at the
  /// deadline (the destructor then kills it).
  int join(std::chrono::milliseconds timeout = std::chrono::seconds(30));

  /// SIGKILLs the child and reaps it.
  void kill();

 private:
  pid_t pid_ = -1;
};

}  // namespace cohort::test
