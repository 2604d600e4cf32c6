#pragma once

// Runs a command for a test, independently of lib/launch (posix_spawn, output to files), with a
// bounded wait. The test process is a child subreaper, so anything the command leaves behind
// (a live orphan or an unreaped zombie) is re-parented to us and leftover_descendants() sees it.

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include <sys/types.h>

namespace cohort::test {

struct CommandResult {
  int exit_code = -1;  ///< 128 + signal when killed by one
  std::string out;
  std::string err;
};

class RunningCommand {
 public:
  /// Starts `argv` with the current environment plus `extra_env`; stdin is /dev/null.
  RunningCommand(const std::vector<std::string>& argv,
                 const std::map<std::string, std::string>& extra_env = {});
  ~RunningCommand();
  RunningCommand(const RunningCommand&) = delete;
  RunningCommand& operator=(const RunningCommand&) = delete;

  pid_t pid() const { return pid_; }
  /// Output so far.
  std::string out_so_far() const;
  /// Waits until `text` appears in stdout; false if `timeout` passes first.
  bool wait_for_output(const std::string& text, std::chrono::milliseconds timeout) const;
  /// Waits for exit; throws std::runtime_error (after SIGKILL) if `timeout` passes first.
  CommandResult wait(std::chrono::milliseconds timeout);

 private:
  pid_t pid_ = -1;
  bool reaped_ = false;
  std::string out_path_, err_path_;
};

/// Runs to completion (see RunningCommand::wait).
CommandResult run_command(const std::vector<std::string>& argv,
                          const std::map<std::string, std::string>& extra_env = {},
                          std::chrono::milliseconds timeout = std::chrono::seconds(60));

/// Makes this process a child subreaper (once).
void become_subreaper();

/// Reaps and returns the pids of processes re-parented to us that have exited, plus any still
/// alive, waiting up to `settle` for stragglers to be re-parented and exit.
std::vector<pid_t> leftover_descendants(std::chrono::milliseconds settle);

/// Waits up to `timeout` for `count` descendants re-parented to us to exit (the ranks of a
/// launcher the test killed itself) and reaps them; returns their pids (fewer at the deadline).
std::vector<pid_t> reap_orphans(std::size_t count, std::chrono::milliseconds timeout);

/// The path of the built cohort-run (COHORT_RUN, set by meson).
std::string cohort_run_path();

/// A TCP port that was free a moment ago (bound to port 0 on loopback, then released).
int free_port();

}  // namespace cohort::test
