#include "comm/dump_on_signal.hpp"

#include "comm/flight_recorder.hpp"
#include "core/log.hpp"
#include "core/quiet_thread.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <exception>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

namespace cohort::comm {
namespace {

// The write end of the wake-up pipe: all the handler needs. -1 until a thread reads the pipe
// (after fork, until the child starts its own).
std::atomic<int> wake_fd{-1};
static_assert(std::atomic<int>::is_always_lock_free, "the signal handler reads wake_fd");

extern "C" void on_dump_signal(int) {
  const int saved_errno = errno;
  const int fd = wake_fd.load(std::memory_order_relaxed);
  if (fd >= 0) {
    // Non-blocking: a full pipe already holds a wake-up, and the dump it triggers covers this one.
    const char byte = 1;
    [[maybe_unused]] const ssize_t written = ::write(fd, &byte, 1);
  }
  errno = saved_errno;
}

struct SignalDumps {
  std::mutex mutex;  // guards everything here; held for a whole dump pass
  std::vector<const FlightRecorder*> live;
  bool handler_tried = false;  // once per process: installing is not retried
  bool handler_ours = false;
  bool thread_running = false;  // in this process (a fork child starts its own)
  int read_fd = -1;             // the thread's end of the pipe
};

// Never destroyed: the thread may be dumping while static destructors run at exit.
SignalDumps& dumps() {
  static SignalDumps* instance = new SignalDumps;
  return *instance;
}

void dump_all_live() {
  SignalDumps& d = dumps();
  std::lock_guard lock(d.mutex);
  for (const FlightRecorder* recorder : d.live) {
    try {
      const std::string path = recorder->dump({}, DumpReason::Signal);
      COHORT_LOG_INFO("SIGUSR1: flight record written to {}", path);
    } catch (const std::exception& e) {
      COHORT_LOG_WARN("SIGUSR1: could not write a flight record: {}", e.what());
    }
  }
}

void read_wake_ups(int read_fd) {
  char bytes[64];
  for (;;) {
    const ssize_t n = ::read(read_fd, bytes, sizeof bytes);
    if (n > 0) {
      // Several signals before the read are one dump: each dump shows the state at its time.
      dump_all_live();
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      return;  // the write end closed (fork child cleanup) or the pipe broke
    }
  }
}

// fork(): the child gets a copy of the mutex in whatever state it was; holding it across the
// fork makes that state "locked by the forking thread", which the child can then release.
void before_fork() {
  dumps().mutex.lock();
}
void after_fork_in_parent() {
  dumps().mutex.unlock();
}
void after_fork_in_child() {
  SignalDumps& d = dumps();
  d.live.clear();  // the parent's communicators are not the child's to dump
  d.thread_running = false;
  // The pipe still belongs to the parent's thread: the child's signals must not wake it.
  const int fd = wake_fd.exchange(-1);
  if (fd >= 0) ::close(fd);
  if (d.read_fd >= 0) ::close(std::exchange(d.read_fd, -1));
  d.mutex.unlock();
}

// Installs the handler unless SIGUSR1 is taken (mutex held). Logs why not, once.
void try_install_handler(SignalDumps& d) {
  d.handler_tried = true;
  struct sigaction current {};
  if (::sigaction(SIGUSR1, nullptr, &current) != 0) {
    COHORT_LOG_WARN("flight recorder: cannot read SIGUSR1's disposition ({}); no dumps on SIGUSR1",
                    std::strerror(errno));
    return;
  }
  const bool is_default = (current.sa_flags & SA_SIGINFO) == 0 && current.sa_handler == SIG_DFL;
  if (!is_default) {
    COHORT_LOG_INFO("flight recorder: SIGUSR1 is the application's; no dumps on SIGUSR1");
    return;
  }
  if (const int err = ::pthread_atfork(before_fork, after_fork_in_parent, after_fork_in_child)) {
    COHORT_LOG_WARN("flight recorder: pthread_atfork failed ({}); no dumps on SIGUSR1",
                    std::strerror(err));
    return;
  }
  struct sigaction action {};
  action.sa_handler = on_dump_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;  // interrupted system calls of the application resume
  if (::sigaction(SIGUSR1, &action, nullptr) != 0) {
    COHORT_LOG_WARN("flight recorder: cannot install a SIGUSR1 handler ({}); no dumps on SIGUSR1",
                    std::strerror(errno));
    return;
  }
  d.handler_ours = true;
}

// Starts this process's reading thread (mutex held).
void start_thread(SignalDumps& d) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    COHORT_LOG_WARN("flight recorder: pipe2 failed ({}); no dumps on SIGUSR1",
                    std::strerror(errno));
    return;
  }
  // Only the handler's end is non-blocking; the thread blocks in read().
  ::fcntl(fds[1], F_SETFL, ::fcntl(fds[1], F_GETFL) | O_NONBLOCK);
  try {
    // Signals are for the application's threads (SIGUSR1 for its handler); this one only reads
    // the pipe.
    start_quiet_detached([read_fd = fds[0]] {
      read_wake_ups(read_fd);
      ::close(read_fd);
    });
  } catch (const std::exception& e) {
    COHORT_LOG_WARN("flight recorder: cannot start the SIGUSR1 thread ({}); no dumps on SIGUSR1",
                    e.what());
    ::close(fds[0]);
    ::close(fds[1]);
    return;
  }
  wake_fd.store(fds[1]);
  d.read_fd = fds[0];
  d.thread_running = true;
}

}  // namespace

void dump_on_signal(const FlightRecorder* recorder) noexcept {
  SignalDumps& d = dumps();
  std::lock_guard lock(d.mutex);
  if (!d.handler_tried) try_install_handler(d);
  if (!d.handler_ours) return;
  if (!d.thread_running) start_thread(d);
  try {
    d.live.push_back(recorder);
  } catch (const std::bad_alloc&) {
    COHORT_LOG_WARN("flight recorder: out of memory; communicator not dumped on SIGUSR1");
  }
}

void stop_dumping_on_signal(const FlightRecorder* recorder) noexcept {
  SignalDumps& d = dumps();
  std::lock_guard lock(d.mutex);
  d.live.erase(std::remove(d.live.begin(), d.live.end(), recorder), d.live.end());
}

}  // namespace cohort::comm
