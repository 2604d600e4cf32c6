#include "algorithms/measured_choice.hpp"

#include <algorithm>

namespace cohort::algorithms {

MeasuredChoice::MeasuredChoice(std::size_t class_bytes, SmallClass small) noexcept {
  if (class_bytes >= kLargeClassBytes) return;
  trial_calls_ = kSmallTrialCalls;
  by_time_alone_ = small == SmallClass::AnyMemory || class_bytes >= kAnyMemoryClassBytes;
  const std::size_t calls = kSmallBytesBetweenTrials / std::max<std::size_t>(class_bytes, 1);
  calls_between_trials_ = static_cast<std::uint32_t>(
      std::clamp<std::size_t>(calls, kCallsBetweenTrials, kMaxCallsBetweenTrials));
}

MeasuredChoice::Which MeasuredChoice::next() const noexcept {
  if (trial_ < trial_calls_) return trial_ % 2 == 0 ? kTable : kAlternative;
  return chosen_;
}

void MeasuredChoice::record(double seconds, bool mappable) noexcept {
  if (trial_ < trial_calls_) {
    const int which = trial_ % 2;
    best_[which] = trial_ < 2 ? seconds : std::min(best_[which], seconds);
    ordinary_ = (trial_ > 0 && ordinary_) || !mappable;
    ++trial_;
    return;
  }
  // The winner's calls: after kCallsBetweenTrials of them, measure again.
  if (++since_vote_ >= calls_between_trials_) {
    trial_ = 0;
    since_vote_ = 0;
  }
}

void MeasuredChoice::decide(const std::array<double, 3>& slowest) noexcept {
  const bool eligible = by_time_alone_ || slowest[2] == 0.0;
  chosen_ = eligible && slowest[kAlternative] < kMargin * slowest[kTable] ? kAlternative : kTable;
  trial_ = trial_calls_ + 1;  // voted: the winner runs
  since_vote_ = 0;
}

}  // namespace cohort::algorithms
