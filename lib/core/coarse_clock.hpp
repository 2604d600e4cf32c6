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

/// The coarse clock's resolution (one tick), read once.
inline std::chrono::nanoseconds coarse_resolution() noexcept {
  static const std::chrono::nanoseconds resolution = [] {
    timespec ts{};
    if (::clock_getres(CLOCK_MONOTONIC_COARSE, &ts) != 0)
      return std::chrono::nanoseconds(10'000'000);
    return std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec);
  }();
  return resolution;
}

/// A deadline `timeout` from now, taken from the coarse clock plus one tick, so it is never
/// earlier than steady_clock::now() + timeout and at most a tick later: what every op takes at
/// its start, where a precise read would cost more than the rest of a tiny op's bookkeeping.
inline std::chrono::steady_clock::time_point coarse_deadline(
    std::chrono::steady_clock::duration timeout) noexcept {
  return coarse_now() + timeout + coarse_resolution();
}

}  // namespace cohort
