#pragma once

// cohort-run's part in the flight recorder (lib/comm/flight_recorder.hpp): every rank gets a
// COHORT_TRACE_DIR, so a rank whose communicator fails dumps its record there; when the job
// fails, the ranks still running are asked for theirs (SIGUSR1) before they are stopped; and the
// failure summary ends with cohort-trace's verdict over whatever records the job left.
//
// The directory: the user's COHORT_TRACE_DIR when set (then only records written during this job
// count), otherwise a fresh "<temp dir>/cohort-run-trace-XXXXXX" that is removed at the end unless
// it holds the records of a failed job (the summary names it, for cohort-trace). Each node's
// launcher has its own: a multi-node job's summary judges the records of that node's ranks.

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <sys/types.h>

namespace cohort::run {

/// How long a failing job waits for the ranks' dumps before stopping them. A dump is a few
/// milliseconds of work; the bound covers a loaded machine, and is spent only on ranks that
/// handle SIGUSR1 yet never answer.
inline constexpr std::chrono::milliseconds kDumpWait{3000};

/// A running rank's process.
struct RankPid {
  int rank = 0;
  pid_t pid = 0;
};

class JobFlightRecords {
 public:
  /// `user_dir`: COHORT_TRACE_DIR as the ranks would otherwise see it (from --env or the
  /// environment), empty when unset. Throws Error(SystemError) when a temp dir cannot be made.
  explicit JobFlightRecords(const std::string& user_dir);
  /// Removes a directory of our own unless keep() was called. Never throws.
  ~JobFlightRecords();
  JobFlightRecords(const JobFlightRecords&) = delete;
  JobFlightRecords& operator=(const JobFlightRecords&) = delete;

  /// The value every rank gets as COHORT_TRACE_DIR.
  const std::string& dir() const noexcept { return dir_; }

  /// Sends SIGUSR1 to each of `ranks` that catches it (as /proc/<pid>/status says: a rank
  /// without a handler would die of it) and waits until each signalled rank wrote a record or
  /// exited, at most `limit`. Never throws.
  void request_dumps(const std::vector<RankPid>& ranks, std::chrono::milliseconds limit) noexcept;

  /// The verdict over this job's records, one line each ("flight records in <dir>:", then
  /// cohort-trace's verdict); empty when the job left none. Keeps a directory of our own when
  /// there is something in it. Never throws (an unreadable record becomes a line saying so).
  std::vector<std::string> verdict_lines() noexcept;

 private:
  std::string dir_;
  bool owned_ = false;
  bool keep_ = false;
  /// Records older than this are an earlier job's (only looked at in a user's directory).
  std::filesystem::file_time_type started_;
};

/// Whether process `pid` has a handler for `signal` (its SigCgt mask in /proc/<pid>/status).
bool catches_signal(pid_t pid, int signal);

}  // namespace cohort::run
