#include "algorithms/measured_choice.hpp"

#include <algorithm>

namespace cohort::algorithms {

MeasuredChoice::Which MeasuredChoice::next() const noexcept {
  if (trial_ < kTrialCalls) return trial_ % 2 == 0 ? kTable : kAlternative;
  return chosen_;
}

void MeasuredChoice::record(double seconds) noexcept {
  if (trial_ < kTrialCalls) {
    const int which = trial_ % 2;
    best_[which] = trial_ < 2 ? seconds : std::min(best_[which], seconds);
    ++trial_;
    return;
  }
  // The winner's calls: after kCallsBetweenTrials of them, measure again.
  if (++since_vote_ >= kCallsBetweenTrials) {
    trial_ = 0;
    since_vote_ = 0;
  }
}

void MeasuredChoice::decide(const std::array<double, 2>& slowest) noexcept {
  chosen_ = slowest[kAlternative] < kMargin * slowest[kTable] ? kAlternative : kTable;
  trial_ = kTrialCalls + 1;  // voted: the winner runs
  since_vote_ = 0;
}

}  // namespace cohort::algorithms
