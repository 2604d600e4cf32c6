#pragma once

// Helper threads that signals meant for the application never reach.

#include <pthread.h>
#include <signal.h>
#include <thread>
#include <utility>

namespace cohort {

/// Runs `body` on a detached thread in which every signal is blocked from its first instruction,
/// except the faults a crash raises (so a crash in it is still reported as one): a signal sent
/// to the process (SIGINT, SIGTERM, SIGCHLD, a profiler's) goes to one of the application's own
/// threads, as it expects. Throws std::system_error when no thread can start.
template <class Body>
void start_quiet_detached(Body&& body) {
  sigset_t quiet, previous;
  sigfillset(&quiet);
  for (const int fault : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGSYS, SIGTRAP})
    sigdelset(&quiet, fault);
  // A new thread inherits its creator's mask: block here for the creation, then restore.
  pthread_sigmask(SIG_BLOCK, &quiet, &previous);
  struct Restore {
    const sigset_t& mask;
    ~Restore() { pthread_sigmask(SIG_SETMASK, &mask, nullptr); }
  } restore{previous};
  std::thread(std::forward<Body>(body)).detach();
}

}  // namespace cohort
