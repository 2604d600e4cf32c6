#pragma once

// How a child process ended, decoded from waitpid()'s status word once, so every report and
// exit code is derived from the same facts.

#include <string>

namespace cohort::launcher {

struct ExitStatus {
  /// True when the process called exit(); false when a signal killed it.
  bool exited = true;
  /// exit() code when `exited`, otherwise 0.
  int code = 0;
  /// Terminating signal when !`exited`, otherwise 0.
  int signal = 0;
  bool core_dumped = false;

  /// Decodes a waitpid() status.
  static ExitStatus from_wait_status(int status) noexcept;

  bool success() const noexcept { return exited && code == 0; }
  /// The shell's convention: the exit code, or 128 + signal number.
  int shell_code() const noexcept { return exited ? code : 128 + signal; }
  /// "exit code 7" or "signal SIGSEGV (Segmentation fault), core dumped".
  std::string describe() const;
};

/// "SIGSEGV" for SIGSEGV; "SIG<n>" for numbers without a name (real-time signals).
std::string signal_name(int signal);

}  // namespace cohort::launcher
