#include "cohort_run/interrupt_pipe.hpp"

#include "core/log.hpp"
#include "core/system_error.hpp"

#include <cerrno>

#include <pthread.h>
#include <unistd.h>

namespace cohort::run {
namespace {

volatile sig_atomic_t g_write_fd = -1;

extern "C" void on_interrupt(int signal) {
  const int saved_errno = errno;
  const unsigned char byte = static_cast<unsigned char>(signal);
  // Non-blocking: if the pipe is full, the supervisor has plenty of bytes to act on already.
  [[maybe_unused]] const ssize_t ignored = ::write(g_write_fd, &byte, 1);
  errno = saved_errno;
}

}  // namespace

InterruptPipe::InterruptPipe() : pipe_(launcher::make_pipe()) {
  launcher::set_nonblocking(pipe_.write.get());
  launcher::set_nonblocking(pipe_.read.get());
  g_write_fd = pipe_.write.get();
  struct sigaction action {};
  action.sa_handler = on_interrupt;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  for (std::size_t i = 0; i < std::size(kSignals); ++i) {
    if (::sigaction(kSignals[i], &action, &previous_[i]) != 0) {
      throw system_error("sigaction", errno);
    }
  }
}

InterruptPipe::~InterruptPipe() {
  for (std::size_t i = 0; i < std::size(kSignals); ++i) {
    if (::sigaction(kSignals[i], &previous_[i], nullptr) != 0) {
      COHORT_LOG_WARN("restoring the handler of signal {} failed", kSignals[i]);
    }
  }
  g_write_fd = -1;
}

BlockedInterrupts::BlockedInterrupts() {
  sigset_t block;
  sigemptyset(&block);
  for (int signal : InterruptPipe::kSignals) sigaddset(&block, signal);
  ::pthread_sigmask(SIG_BLOCK, &block, &previous_);
}

BlockedInterrupts::~BlockedInterrupts() {
  ::pthread_sigmask(SIG_SETMASK, &previous_, nullptr);
}

}  // namespace cohort::run
