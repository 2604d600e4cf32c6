#pragma once

// Timing helpers shared by the kernel microbenchmarks (cohort-reduce-bench, cohort-cast-bench).

#include <algorithm>
#include <chrono>
#include <cstddef>

namespace cohort::bench {

/// Runs `body` until at least `min_seconds` pass (at least once), `repeats` times; returns the
/// fastest seconds per call.
template <class Body>
double best_seconds_per_call(Body&& body, double min_seconds, int repeats) {
  using Clock = std::chrono::steady_clock;
  double best = 1e300;
  for (int r = 0; r < repeats; ++r) {
    std::size_t calls = 0;
    const auto start = Clock::now();
    double elapsed = 0;
    do {
      body();
      ++calls;
      elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    } while (elapsed < min_seconds);
    best = std::min(best, elapsed / static_cast<double>(calls));
  }
  return best;
}

/// Keeps the compiler from proving a buffer unused.
inline void escape(void* p) {
  asm volatile("" : : "g"(p) : "memory");
}

}  // namespace cohort::bench
