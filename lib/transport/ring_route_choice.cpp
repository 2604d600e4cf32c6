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
  if (s.verdict) return false;
  if (timing_under_way(c) && s.sent < kMaxTrials / 2) return false;
  const std::optional<ReceiverTimings> mine = own_timings(c);
  const std::uint64_t spread = std::uint64_t{theirs.spread} + (mine ? mine->spread : 0);
  const std::uint64_t rendezvous = std::uint64_t{theirs.rendezvous} + (mine ? mine->rendezvous : 0);
  // The spread only where its receives took at most kSpreadShare of the rendezvous's time:
  // closer calls flip with the noise of 8 timings (on the 2026-12-02 host, 2 of 16 verdicts in
  // four launches went to a spread 4% and 12% faster, and those rows ran 1.5-2x slower than by
  // rendezvous), and the rendezvous, which Open MPI's single copy matches, is the safer loser.
  s.verdict = spread * kSpreadShare.den <= rendezvous * kSpreadShare.num ? Route::Spread
                                                                         : Route::Rendezvous;
  return true;
}

RingRouteChoice::Route RingRouteChoice::next(int c) noexcept {
  COHORT_CHECK(c >= 0 && c < kClasses);
  Sending& s = sending_[static_cast<std::size_t>(c)];
  if (s.verdict) return *s.verdict;
  if (s.sent >= kMaxTrials) return Route::Spread;
  // Blocks of kTrials, spread first: each way's timings then come from runs of it, as it
  // would run once chosen. Messages alternating one by one timed neither: on the 2026-12-02
  // host the spread's receives took 0.83-0.89 of the rendezvous's that way, and five verdicts of
  // sixteen went to it, whose rows then ran 1.5-4x slower than by rendezvous.
  return (s.sent++ / kTrials) % 2 == 0 ? Route::Spread : Route::Rendezvous;
}

bool RingRouteChoice::wants_receive_timing(int c, Route route) const noexcept {
  COHORT_CHECK(c >= 0 && c < kClasses);
  const Receiving& r = receiving_[static_cast<std::size_t>(c)];
  return !r.published && !(route == Route::Spread ? r.spread : r.rendezvous).full();
}

bool RingRouteChoice::wants_receive_timing(int c) const noexcept {
  return wants_receive_timing(c, Route::Spread) || wants_receive_timing(c, Route::Rendezvous);
}

std::optional<RingRouteChoice::ReceiverTimings> RingRouteChoice::received(
    int c, Route route, std::uint64_t ns) noexcept {
  COHORT_CHECK(c >= 0 && c < kClasses);
  Receiving& r = receiving_[static_cast<std::size_t>(c)];
  if (r.published) return std::nullopt;
  (route == Route::Spread ? r.spread : r.rendezvous).add(ns);
  if (!r.spread.full() || !r.rendezvous.full()) return std::nullopt;
  r.published = ReceiverTimings{r.spread.median(), r.rendezvous.median()};
  return r.published;
}

std::optional<RingRouteChoice::ReceiverTimings> RingRouteChoice::own_timings(int c) const noexcept {
  COHORT_CHECK(c >= 0 && c < kClasses);
  return receiving_[static_cast<std::size_t>(c)].published;
}

bool RingRouteChoice::timing_under_way(int c) const noexcept {
  COHORT_CHECK(c >= 0 && c < kClasses);
  const Receiving& r = receiving_[static_cast<std::size_t>(c)];
  return !r.published && (r.spread.count > 0 || r.rendezvous.count > 0);
}

}  // namespace cohort::transport
