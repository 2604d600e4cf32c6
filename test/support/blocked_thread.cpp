#include "support/blocked_thread.hpp"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace cohort::test {
namespace {

std::string task_file(pid_t tid, const char* name) {
  const std::string path = "/proc/self/task/" + std::to_string(tid) + "/" + name;
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The state letter of /proc/.../stat: "tid (comm) S ...", where comm may hold spaces and ')'.
char state_of(pid_t tid) {
  const std::string stat = task_file(tid, "stat");
  const std::size_t close = stat.rfind(')');
  if (close == std::string::npos || close + 2 >= stat.size())
    throw std::runtime_error("unexpected /proc stat line: " + stat);
  return stat[close + 2];
}

bool is_fd_wait(long call) {
  switch (call) {
#ifdef SYS_poll
    case SYS_poll:
#endif
#ifdef SYS_select
    case SYS_select:
#endif
#ifdef SYS_epoll_wait
    case SYS_epoll_wait:
#endif
    case SYS_ppoll:
    case SYS_pselect6:
    case SYS_epoll_pwait:
    case SYS_read:
    case SYS_recvfrom:
    case SYS_recvmsg: return true;
    default: return false;
  }
}

// "<number> <arg0> <arg1> ..." while the thread is in a system call ("running" or "-1 ..."
// otherwise). For futex(address, operation, value, timeout, ...), arg1 is the operation and arg3
// the timeout's address.
bool in_call(pid_t tid, BlockedIn where) {
  std::istringstream fields(task_file(tid, "syscall"));
  long call = -1;
  if (!(fields >> call)) return false;  // "running"
  if (where == BlockedIn::FileDescriptor) return is_fd_wait(call);
  if (call != SYS_futex) return false;
  std::string address, operation, value, timeout;
  if (!(fields >> address >> operation >> value >> timeout)) return false;
  const unsigned long op = std::stoul(operation, nullptr, 16);
  if ((op & FUTEX_CMD_MASK) != FUTEX_WAIT_BITSET) return false;
  return where == BlockedIn::ConditionVariable || std::stoul(timeout, nullptr, 16) == 0;
}

}  // namespace

pid_t current_thread_id() {
  return static_cast<pid_t>(::syscall(SYS_gettid));
}

std::optional<pid_t> find_thread(std::string_view name) {
  std::optional<pid_t> found;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream in(task.path() / "comm");
    std::string comm;
    if (!std::getline(in, comm) || comm != name) continue;  // a thread gone meanwhile reads empty
    if (found) return std::nullopt;
    found = static_cast<pid_t>(std::stol(task.path().filename().string()));
  }
  return found;
}

bool wait_until_blocked(pid_t tid, BlockedIn where, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    // The state first: 'S' read before the call means the thread was asleep when the call was
    // read, not in a call it has since left.
    if (state_of(tid) == 'S' && in_call(tid, where) && state_of(tid) == 'S') return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    ::sched_yield();
  }
}

}  // namespace cohort::test
