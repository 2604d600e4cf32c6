#include "transport/ring_route_choice.hpp"

#include "core/check.hpp"

#include <algorithm>
#include <bit>
#include <limits>
#include <utility>

namespace cohort::transport {

int RingRouteChoice::class_of(std::size_t bytes) noexcept {
  if (bytes <= kSmallest || bytes > kLargest) return -1;
  // (32, 64] KiB -> 0, ..., (256, 512] -> 3: the power of two at or above, past 64 KiB.
  return std::bit_width(bytes - 1) - std::bit_width(kSmallest);
}

void RingRouteChoice::Timings::add(std::uint64_t t) noexcept {
  if (full()) return;
  ns[static_cast<std::size_t>(count++)] = static_cast<std::uint32_t>(
      std::min<std::uint64_t>(t, std::numeric_limits<std::uint32_t>::max()));
}

std::uint32_t RingRouteChoice::Timings::median() const noexcept {
  if (count == 0) return 0;
  // Insertion sort of at most kTrials values (std::sort's unrolled prologue trips GCC 12's
  // -Warray-bounds on an array this short).
  std::array<std::uint32_t, kTrials> sorted = ns;
  for (int i = 1; i < count; ++i)
    for (int j = i;
         j > 0 && sorted[static_cast<std::size_t>(j - 1)] > sorted[static_cast<std::size_t>(j)];
         --j)
      std::swap(sorted[static_cast<std::size_t>(j - 1)], sorted[static_cast<std::size_t>(j)]);
  const auto half = static_cast<std::size_t>(count / 2);
  // An even count: the lower middle's and upper middle's mean.
  return count % 2 == 1
             ? sorted[half]
             : static_cast<std::uint32_t>((std::uint64_t{sorted[half - 1]} + sorted[half]) / 2);
}

bool RingRouteChoice::settled(int c) const noexcept {
  COHORT_CHECK(c >= 0 && c < kClasses);
  const Sending& s = sending_[static_cast<std::size_t>(c)];
  return s.verdict.has_value() || s.sent >= kMaxTrials;
}

bool RingRouteChoice::decide(int c, const ReceiverTimings& theirs) noexcept {
  COHORT_CHECK(c >= 0 && c < kClasses);
  Sending& s = sending_[static_cast<std::size_t>(c)];
  if (s.verdict || !s.copy_in.full()) return false;
  const std::uint64_t spread = std::uint64_t{s.copy_in.median()} + theirs.spread_copy_out;
  s.verdict = theirs.rendezvous_copy < spread ? Route::Rendezvous : Route::Spread;
  return true;
}

RingRouteChoice::Route RingRouteChoice::next(int c) noexcept {
  COHORT_CHECK(c >= 0 && c < kClasses);
  Sending& s = sending_[static_cast<std::size_t>(c)];
  if (s.verdict) return *s.verdict;
  if (s.sent >= kMaxTrials) return Route::Spread;
  return s.sent++ % 2 == 0 ? Route::Spread : Route::Rendezvous;
}

bool RingRouteChoice::wants_send_timing(int c) const noexcept {
  COHORT_CHECK(c >= 0 && c < kClasses);
  const Sending& s = sending_[static_cast<std::size_t>(c)];
  return !s.verdict && !s.copy_in.full();
}

void RingRouteChoice::sent_spread(int c, std::uint64_t ns) noexcept {
  COHORT_CHECK(c >= 0 && c < kClasses);
  sending_[static_cast<std::size_t>(c)].copy_in.add(ns);
}

std::uint32_t RingRouteChoice::median_copy_in(int c) const noexcept {
  COHORT_CHECK(c >= 0 && c < kClasses);
  const Sending& s = sending_[static_cast<std::size_t>(c)];
  return s.verdict ? s.copy_in.median() : 0;
}

bool RingRouteChoice::wants_receive_timing(int c, Route route) const noexcept {
  COHORT_CHECK(c >= 0 && c < kClasses);
  const Receiving& r = receiving_[static_cast<std::size_t>(c)];
  return !r.published && !(route == Route::Spread ? r.spread_copy_out : r.rendezvous_copy).full();
}

std::optional<RingRouteChoice::ReceiverTimings> RingRouteChoice::received(
    int c, Route route, std::uint64_t ns) noexcept {
  COHORT_CHECK(c >= 0 && c < kClasses);
  Receiving& r = receiving_[static_cast<std::size_t>(c)];
  if (r.published) return std::nullopt;
  (route == Route::Spread ? r.spread_copy_out : r.rendezvous_copy).add(ns);
  if (!r.spread_copy_out.full() || !r.rendezvous_copy.full()) return std::nullopt;
  r.published = true;
  return ReceiverTimings{r.spread_copy_out.median(), r.rendezvous_copy.median()};
}

}  // namespace cohort::transport
