#include "progress.hpp"

#include <fmt/format.h>

#include <cstdio>

namespace cohort::bench {

ProgressReporter::ProgressReporter(bool enabled, std::size_t total_steps,
                                   std::chrono::milliseconds quiet_for,
                                   std::chrono::milliseconds interval)
    : enabled_(enabled),
      total_(total_steps),
      quiet_for_(quiet_for),
      interval_(interval),
      start_(Clock::now()) {}

void ProgressReporter::step(std::size_t done, std::string_view what) {
  if (!enabled_) return;
  const auto now = Clock::now();
  if (now - start_ < quiet_for_) return;
  if (printed_ && now - last_print_ < interval_) return;
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  fmt::print(stderr, "# cohort-bench progress: {}/{} ({}) {:.1f} s\n", done, total_, what, elapsed);
  std::fflush(stderr);
  last_print_ = now;
  printed_ = true;
}

void ProgressReporter::finish() {
  if (!enabled_ || !printed_) return;
  const double elapsed = std::chrono::duration<double>(Clock::now() - start_).count();
  fmt::print(stderr, "# cohort-bench progress: {}/{} done in {:.1f} s\n", total_, total_, elapsed);
  std::fflush(stderr);
}

}  // namespace cohort::bench
