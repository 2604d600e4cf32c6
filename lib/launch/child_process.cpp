#include "launch/child_process.hpp"

#include "core/log.hpp"
#include "core/pidfd.hpp"
#include "core/quiet_thread.hpp"
#include "core/system_error.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <exception>
#include <fstream>
#include <string>
#include <utility>

#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

namespace cohort::launcher {

ChildProcess::~ChildProcess() {
  kill_and_reap();
}

ChildProcess::ChildProcess(ChildProcess&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)), status_(std::exchange(other.status_, std::nullopt)) {}

ChildProcess& ChildProcess::operator=(ChildProcess&& other) noexcept {
  if (this != &other) {
    kill_and_reap();
    pid_ = std::exchange(other.pid_, -1);
    status_ = std::exchange(other.status_, std::nullopt);
  }
  return *this;
}

bool ChildProcess::signal_group(int signal) noexcept {
  // Once the child is reaped its pid, and so its group's id, may be another process's: the
  // group's stragglers were killed in try_reap, while the zombie still held the number.
  if (!running()) return false;
  // The child is its own group leader (pgid == pid): this reaches whatever it started that
  // stayed in the group.
  if (::kill(-pid_, signal) == 0) return true;
  if (errno == ESRCH) {
    // The child may not have called setpgid yet (the parent calls it too, but a failed race
    // leaves the pid in our group): signal the process itself.
    return ::kill(pid_, signal) == 0;
  }
  return false;
}

bool ChildProcess::signal(int signal) noexcept {
  return running() && ::kill(pid_, signal) == 0;  // unreaped: the pid is still this child's
}

std::optional<ExitStatus> ChildProcess::try_reap() {
  if (!running()) return status_;
  // Look without reaping: while the child is a zombie its pid cannot be reused, so whatever it
  // left in its group (a backgrounded command) can be killed by the group's id safely. Once it
  // is reaped, kill(-pid) could reach an unrelated group that took the number.
  siginfo_t info{};
  int peeked;
  do {
    peeked = ::waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT);
  } while (peeked < 0 && errno == EINTR);
  if (peeked < 0) throw system_error("waitid(" + std::to_string(pid_) + ")", errno);
  if (info.si_pid == 0) return std::nullopt;  // still running
  ::kill(-pid_, SIGKILL);
  int status = 0;
  pid_t got;
  do {
    got = ::waitpid(pid_, &status, WNOHANG);
  } while (got < 0 && errno == EINTR);
  if (got == 0) return std::nullopt;
  if (got < 0) throw system_error("waitpid(" + std::to_string(pid_) + ")", errno);
  status_ = ExitStatus::from_wait_status(status);
  return status_;
}

void ChildProcess::abandon() noexcept {
  if (!running()) return;
  ExitStatus killed;
  killed.exited = false;
  killed.signal = SIGKILL;
  status_ = killed;
  const pid_t pid = pid_;
  // Opened now, while the child is unreaped and its pid cannot have been reused: a waitpid(-1) of
  // the launcher's (a subreaper's) may reap it before the thread waits, and the pid may then go to
  // a new child of this process, which waitpid(pid) would reap in its place. The pidfd names only
  // this child (waitid then fails with ECHILD, and the thread ends).
  UniqueFd pidfd = open_pidfd(pid);
  // ESRCH: already reaped (by the launcher's waitpid(-1)); waiting by pid could reap another.
  if (!pidfd && errno == ESRCH) return;
  try {
    // Blocks until the kernel call returns or the tracer lets go; then the zombie is gone.
    start_quiet_detached([pid, pidfd = std::move(pidfd)] {
      // P_PIDFD by its value: glibc names it only from 2.36 (Linux has it from 5.4).
      constexpr auto kPidfd = static_cast<idtype_t>(3);
      if (pidfd.valid()) {
        siginfo_t info{};
        int rc;
        do {
          rc = ::waitid(kPidfd, static_cast<id_t>(pidfd.get()), &info, WEXITED);
        } while (rc < 0 && errno == EINTR);
        if (rc == 0 || errno != EINVAL) return;  // reaped, or reaped by the launcher (ECHILD)
      }
      // No pidfd, or a kernel that cannot wait on one (5.3): the pid it is, with the window
      // described above.
      while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
      }
    });
  } catch (const std::exception& e) {
    COHORT_LOG_WARN("child {} will stay a zombie once it dies: no thread to reap it ({})", pid,
                    e.what());
  }
}

void ChildProcess::kill_and_reap() noexcept {
  if (!running()) return;
  signal_group(SIGKILL);
  // Bounded: a child asleep uninterruptibly in the kernel dies only when its call returns.
  const auto give_up = std::chrono::steady_clock::now() + kReapAfterKillWait;
  for (;;) {
    int status = 0;
    const pid_t got = ::waitpid(pid_, &status, WNOHANG);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      COHORT_LOG_WARN("could not reap child {}: {}", pid_, std::strerror(errno));
      return;
    }
    if (got > 0) {
      status_ = ExitStatus::from_wait_status(status);
      return;
    }
    if (std::chrono::steady_clock::now() >= give_up) {
      COHORT_LOG_WARN("child {} did not exit within {} s of SIGKILL ({}); leaving it behind", pid_,
                      kReapAfterKillWait.count(), describe_process_state(pid_));
      abandon();
      return;
    }
    ::usleep(5'000);
  }
}

std::string describe_process_state(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  std::getline(stat, text);
  // "pid (comm) S ...": comm may hold spaces and parentheses, so the state follows the last ')'.
  const std::size_t close = text.rfind(')');
  if (close == std::string::npos || close + 2 >= text.size()) return "its state is unknown";
  const char state = text[close + 2];
  std::string description = fmt::format("state {}", state);
  if (state == 'D') description += ": uninterruptible sleep";
  if (state == 'Z') description += ": a zombie not yet released to us (a tracer holds it?)";
  std::ifstream wchan_file("/proc/" + std::to_string(pid) + "/wchan");
  std::string wchan;
  std::getline(wchan_file, wchan);
  if (!wchan.empty() && wchan != "0") description += ", in " + wchan;
  return description;
}

namespace {

// Runs in the child between fork and `body`: only async-signal-safe calls.
[[noreturn]] void die_in_child(const char* what) noexcept {
  const int err = errno;
  const char* reason = ::strerror(err);
  write_all(STDERR_FILENO, "cohort launcher: child setup failed: ", 37);
  write_all(STDERR_FILENO, what, std::strlen(what));
  write_all(STDERR_FILENO, ": ", 2);
  write_all(STDERR_FILENO, reason, std::strlen(reason));
  write_all(STDERR_FILENO, "\n", 1);
  ::_exit(127);
}

void prepare_child(pid_t parent, int dev_null, int out, int err,
                   std::span<const int> close_in_child) noexcept {
  // Own process group: stopping the rank stops its descendants too.
  if (::setpgid(0, 0) != 0) die_in_child("setpgid");
  // Die with the launcher. The launcher may already be gone (then we were re-parented).
  if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) die_in_child("prctl(PR_SET_PDEATHSIG)");
  if (::getppid() != parent) ::_exit(128 + SIGKILL);

  // The launcher blocks or catches signals for its own bookkeeping; ranks start clean.
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  for (int sig : {SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGCHLD})
    ::signal(sig, SIG_DFL);

  if (::dup2(dev_null, STDIN_FILENO) < 0) die_in_child("dup2(stdin)");
  if (::dup2(out, STDOUT_FILENO) < 0) die_in_child("dup2(stdout)");
  if (::dup2(err, STDERR_FILENO) < 0) die_in_child("dup2(stderr)");
  for (int fd : close_in_child) ::close(fd);
}

}  // namespace

SpawnedChild fork_child(const std::function<int()>& body, std::span<const int> close_in_child) {
  UniqueFd dev_null = open_dev_null();
  Pipe out = make_pipe();
  Pipe err = make_pipe();
  const pid_t parent = ::getpid();

  // Anything buffered in our stdio would otherwise be written twice (once by the child).
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) throw system_error("fork", errno);

  if (pid == 0) {
    prepare_child(parent, dev_null.get(), out.write.get(), err.write.get(), close_in_child);
    ::close(out.read.get());
    ::close(err.read.get());
    int code = 1;
    try {
      code = body();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s\n", e.what());
    } catch (...) {
      std::fprintf(stderr, "unknown exception\n");
    }
    std::fflush(nullptr);
    ::_exit(code);
  }

  // Also set the group from the parent so a signal sent right after fork reaches the group
  // (EACCES after the child exec'd, ESRCH after it exited: both mean the child did it).
  if (::setpgid(pid, pid) != 0 && errno != EACCES && errno != ESRCH) {
    COHORT_LOG_DEBUG("setpgid({}) from parent: {}", pid, std::strerror(errno));
  }
  SpawnedChild child{ChildProcess(pid), std::move(out.read), std::move(err.read)};
  set_nonblocking(child.stdout_read.get());
  set_nonblocking(child.stderr_read.get());
  return child;
}

}  // namespace cohort::launcher
