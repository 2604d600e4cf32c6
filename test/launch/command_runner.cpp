#include "command_runner.hpp"

#include "support/poll_deadline.hpp"
#include "support/process_exit.hpp"

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <stdexcept>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <spawn.h>
#include <sys/inotify.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

namespace cohort::test {
namespace {

std::string temp_path(const char* suffix) {
  std::string pattern = "/tmp/cohort-run-test-XXXXXX";
  const int fd = ::mkstemp(pattern.data());
  if (fd < 0) throw std::runtime_error("mkstemp failed");
  ::close(fd);
  return pattern + suffix;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Our children according to /proc (waitpid cannot list the live ones).
std::vector<pid_t> children_of(pid_t parent) {
  std::vector<pid_t> children;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string stat = slurp(entry.path() / "stat");
    // "pid (comm) state ppid ...": comm may contain spaces, so parse after the last ')'.
    const std::size_t close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream fields(stat.substr(close + 1));
    char state = 0;
    long ppid = 0;
    if (fields >> state >> ppid && ppid == parent) children.push_back(std::stoi(name));
  }
  return children;
}

int decode(int status) {
  return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
}

}  // namespace

RunningCommand::RunningCommand(const std::vector<std::string>& argv,
                               const std::map<std::string, std::string>& extra_env)
    : out_path_(temp_path(".out")), err_path_(temp_path(".err")) {
  std::vector<std::string> env_storage;
  for (char** entry = environ; *entry; ++entry) {
    const std::string text(*entry);
    if (!extra_env.count(text.substr(0, text.find('=')))) env_storage.push_back(text);
  }
  for (const auto& [key, value] : extra_env) env_storage.push_back(key + "=" + value);
  std::vector<char*> envp, args;
  for (std::string& entry : env_storage) envp.push_back(entry.data());
  envp.push_back(nullptr);
  std::vector<std::string> arg_storage = argv;
  for (std::string& arg : arg_storage) args.push_back(arg.data());
  args.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, out_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0600);
  posix_spawn_file_actions_addopen(&actions, 2, err_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0600);
  const int rc = ::posix_spawnp(&pid_, args[0], &actions, nullptr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) throw std::runtime_error("posix_spawnp " + argv[0] + ": " + std::strerror(rc));
}

RunningCommand::~RunningCommand() {
  if (pid_ > 0 && !reaped_) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  for (const std::string& path : {out_path_, err_path_}) {
    ::unlink(path.c_str());
    ::unlink(path.substr(0, path.size() - 4).c_str());  // the mkstemp placeholder
  }
}

std::string RunningCommand::out_so_far() const {
  return slurp(out_path_);
}

bool RunningCommand::wait_for_output(const std::string& text,
                                     std::chrono::milliseconds timeout) const {
  // Every write to the output file is an IN_MODIFY event: look, then wait for the next write.
  // The watch exists before the first look, so a write in between is not missed.
  const int events = ::inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
  if (events < 0) throw std::runtime_error("inotify_init1 failed");
  const struct CloseOnExit {
    int fd;
    ~CloseOnExit() { ::close(fd); }
  } close_events{events};
  if (::inotify_add_watch(events, out_path_.c_str(), IN_MODIFY) < 0)
    throw std::runtime_error("inotify_add_watch " + out_path_ + " failed");
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (out_so_far().find(text) != std::string::npos) return true;
    pollfd pfd{events, POLLIN, 0};
    const int ready = ::poll(&pfd, 1, poll_timeout_ms(deadline));
    if (ready < 0 && errno != EINTR) throw std::runtime_error("poll on inotify failed");
    if (ready == 0) return out_so_far().find(text) != std::string::npos;
    alignas(inotify_event) char drained[4096];
    while (::read(events, drained, sizeof drained) > 0) {
    }
  }
}

CommandResult RunningCommand::wait(std::chrono::milliseconds timeout) {
  if (!wait_for_exit(pid_, timeout)) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    reaped_ = true;
    throw std::runtime_error("command did not finish in time; stdout:\n" + out_so_far() +
                             "\nstderr:\n" + slurp(err_path_));
  }
  int status = 0;
  while (::waitpid(pid_, &status, 0) < 0) {
    if (errno != EINTR) throw std::runtime_error("waitpid failed");
  }
  reaped_ = true;
  return CommandResult{decode(status), slurp(out_path_), slurp(err_path_)};
}

CommandResult run_command(const std::vector<std::string>& argv,
                          const std::map<std::string, std::string>& extra_env,
                          std::chrono::milliseconds timeout) {
  RunningCommand command(argv, extra_env);
  return command.wait(timeout);
}

void become_subreaper() {
  if (::prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) throw std::runtime_error("PR_SET_CHILD_SUBREAPER");
}

namespace {

// Reaps descendants re-parented to us as they exit, until `enough` of them were reaped, none is
// left, or `until` passes; returns the reaped pids and whether descendants may remain (false
// only when none is left at all).
// A descendant re-parented to us announces its exit with SIGCHLD. Blocked here (this test
// process has no other threads to take it) and taken with sigtimedwait(), so an exit between a
// waitpid() that found nothing and the wait stays pending instead of being missed.
std::pair<std::vector<pid_t>, bool> reap_descendants(std::size_t enough,
                                                     std::chrono::steady_clock::time_point until) {
  sigset_t child_exits;
  sigemptyset(&child_exits);
  sigaddset(&child_exits, SIGCHLD);
  sigset_t previous;
  ::pthread_sigmask(SIG_BLOCK, &child_exits, &previous);
  const struct RestoreMask {
    const sigset_t& mask;
    ~RestoreMask() { ::pthread_sigmask(SIG_SETMASK, &mask, nullptr); }
  } restore{previous};

  std::vector<pid_t> reaped;
  for (;;) {
    if (reaped.size() >= enough) return {reaped, true};
    int status = 0;
    const pid_t got = ::waitpid(-1, &status, WNOHANG);
    if (got > 0) {
      reaped.push_back(got);
      continue;
    }
    if (got < 0 && errno == ECHILD) return {reaped, false};  // no descendants left
    const auto left = until - std::chrono::steady_clock::now();
    if (left <= std::chrono::steady_clock::duration::zero()) return {reaped, true};
    const auto left_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(left).count();
    const timespec wait_for{static_cast<time_t>(left_ns / 1000000000),
                            static_cast<long>(left_ns % 1000000000)};
    ::sigtimedwait(&child_exits, nullptr, &wait_for);  // a SIGCHLD, the end of settle, or EINTR
  }
}

}  // namespace

std::vector<pid_t> leftover_descendants(std::chrono::milliseconds settle) {
  auto [found, may_remain] = reap_descendants(std::numeric_limits<std::size_t>::max(),
                                              std::chrono::steady_clock::now() + settle);
  if (may_remain) {
    // Descendants still alive: name them, kill them so later tests start clean.
    for (pid_t alive : children_of(::getpid())) {
      found.push_back(alive);
      ::kill(alive, SIGKILL);
      ::waitpid(alive, nullptr, 0);
    }
  }
  return found;
}

std::vector<pid_t> reap_orphans(std::size_t count, std::chrono::milliseconds timeout) {
  return reap_descendants(count, std::chrono::steady_clock::now() + timeout).first;
}

std::string cohort_run_path() {
  const char* path = std::getenv("COHORT_RUN");
  if (!path || !*path) throw std::runtime_error("COHORT_RUN is not set (meson sets it)");
  return path;
}

int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ::close(fd);
    throw std::runtime_error("could not find a free port");
  }
  const int port = ntohs(addr.sin_port);
  ::close(fd);
  return port;
}

}  // namespace cohort::test
