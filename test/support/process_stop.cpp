#include "support/process_stop.hpp"

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <system_error>
#include <thread>

#include <signal.h>

namespace cohort::test {

namespace {

// The state letter of /proc/<pid>/task/<tid>/stat: the field after the parenthesised command
// name, which may itself hold spaces and parentheses (hence the last ')').
bool thread_stopped(const std::filesystem::path& task) {
  std::ifstream in(task / "stat");
  const std::string stat{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  const std::size_t close = stat.rfind(')');
  return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] == 'T';
}

}  // namespace

bool stop_process(pid_t pid, std::chrono::milliseconds timeout) {
  if (::kill(pid, SIGSTOP) != 0) return false;
  const auto until = std::chrono::steady_clock::now() + timeout;
  const std::filesystem::path tasks = "/proc/" + std::to_string(pid) + "/task";
  while (std::chrono::steady_clock::now() < until) {
    bool all_stopped = true;
    std::error_code ec;
    for (const auto& task : std::filesystem::directory_iterator(tasks, ec))
      all_stopped = all_stopped && thread_stopped(task.path());
    if (!ec && all_stopped) return true;
    std::this_thread::yield();
  }
  return false;
}

}  // namespace cohort::test
