#include "launch/exit_status.hpp"

#include <cstring>

#include <sys/wait.h>

namespace cohort::launcher {

ExitStatus ExitStatus::from_wait_status(int status) noexcept {
  ExitStatus result;
  if (WIFSIGNALED(status)) {
    result.exited = false;
    result.signal = WTERMSIG(status);
    result.core_dumped = WCOREDUMP(status);
  } else {
    result.code = WEXITSTATUS(status);
  }
  return result;
}

std::string ExitStatus::describe() const {
  if (exited) return "exit code " + std::to_string(code);
  std::string text = "signal " + signal_name(signal);
  // strsignal's text is for people ("Segmentation fault"); the abbreviation is for grep.
  if (const char* description = ::strsignal(signal)) text += std::string(" (") + description + ")";
  if (core_dumped) text += ", core dumped";
  return text;
}

std::string signal_name(int signal) {
  if (const char* abbrev = ::sigabbrev_np(signal)) return std::string("SIG") + abbrev;
  return "SIG" + std::to_string(signal);
}

}  // namespace cohort::launcher
