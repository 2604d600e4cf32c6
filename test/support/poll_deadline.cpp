#include "support/poll_deadline.hpp"

#include <algorithm>
#include <climits>
#include <cstdint>

namespace cohort::test {

int poll_timeout_ms(std::chrono::steady_clock::time_point deadline) {
  const auto left =
      std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
  return static_cast<int>(std::clamp<std::int64_t>(left.count(), 0, INT_MAX));
}

}  // namespace cohort::test
