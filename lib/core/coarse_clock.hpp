#pragma once

// steady_clock's time read from the kernel's tick-granular clock (CLOCK_MONOTONIC_COARSE: a few
// nanoseconds instead of the tens a precise read costs in a VM, at a resolution of one tick,
// 1-4 ms). For checks on the hot path of small ops whose intervals are milliseconds anyway
// (liveness checks, transfer deadlines, flight-record stamps): in a 4-byte send/recv loop the
// precise reads were a sixth of the time. Comparable with steady_clock::now(), which reads
// CLOCK_MONOTONIC (the same time base, finer), as libstdc++ implements it, and never ahead of
// it: a deadline taken from steady_clock and checked against this clock is met late by at most
// a tick, never early.

#include <chrono>
#include <ctime>

namespace cohort {

inline std::chrono::steady_clock::time_point coarse_now() noexcept {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return std::chrono::steady_clock::time_point(std::chrono::seconds(ts.tv_sec) +
                                               std::chrono::nanoseconds(ts.tv_nsec));
}

}  // namespace cohort
