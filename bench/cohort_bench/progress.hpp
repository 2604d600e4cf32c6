#pragma once

// A progress line on stderr for long sweeps: silent for the first few seconds (short runs print
// nothing), then at most one line every couple of seconds. Only the rank that owns the output
// (rank 0) reports; the others construct it disabled.

#include <chrono>
#include <cstddef>
#include <string_view>

namespace cohort::bench {

class ProgressReporter {
 public:
  using Clock = std::chrono::steady_clock;

  /// Quiet for `quiet_for` after construction, then at most one line per `interval`.
  explicit ProgressReporter(bool enabled, std::size_t total_steps,
                            std::chrono::milliseconds quiet_for = std::chrono::seconds(3),
                            std::chrono::milliseconds interval = std::chrono::seconds(2));

  /// Records that step `done` (1-based) of the total finished; `what` names it.
  void step(std::size_t done, std::string_view what);
  /// Prints a final line if any progress line was printed, so the last one says "done".
  void finish();

 private:
  bool enabled_;
  std::size_t total_;
  std::chrono::milliseconds quiet_for_;
  std::chrono::milliseconds interval_;
  Clock::time_point start_;
  Clock::time_point last_print_{};
  bool printed_ = false;
};

}  // namespace cohort::bench
