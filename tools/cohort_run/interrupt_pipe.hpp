#pragma once

// Turns SIGINT/SIGTERM/SIGHUP/SIGQUIT (stop the job) and SIGUSR1/SIGUSR2 (pass to the ranks) to
// the launcher into bytes on a pipe (the classic self-pipe), so the supervisor's poll() loop
// sees them and forwards them to every rank instead of the launcher dying of their default
// action and leaving its ranks behind.

#include "launch/pipes.hpp"

#include <csignal>
#include <initializer_list>
#include <iterator>

namespace cohort::run {

class InterruptPipe {
 public:
  /// Installs the handlers. Only one may exist at a time (the handler writes to a global fd).
  InterruptPipe();
  /// Restores the previous handlers.
  ~InterruptPipe();
  InterruptPipe(const InterruptPipe&) = delete;
  InterruptPipe& operator=(const InterruptPipe&) = delete;

  /// Readable when a signal arrived; each byte is a signal number.
  int fd() const noexcept { return pipe_.read.get(); }
  /// The signals handled.
  static constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};

 private:
  launcher::Pipe pipe_;
  struct sigaction previous_[std::size(kSignals)];
};

/// Blocks the interrupt signals in the calling thread for its lifetime, so threads started
/// meanwhile (the store server's) inherit a mask that leaves the signals to the main thread.
class BlockedInterrupts {
 public:
  BlockedInterrupts();
  ~BlockedInterrupts();
  BlockedInterrupts(const BlockedInterrupts&) = delete;
  BlockedInterrupts& operator=(const BlockedInterrupts&) = delete;

 private:
  sigset_t previous_;
};

}  // namespace cohort::run
