#pragma once

// The timeout argument poll() takes for an absolute deadline, shared by the support helpers that
// block in poll().

#include <chrono>

namespace cohort::test {

/// Milliseconds left until `deadline`: 0 once it has passed, rounded up (so a wait never ends
/// before the deadline) and capped at INT_MAX.
int poll_timeout_ms(std::chrono::steady_clock::time_point deadline);

}  // namespace cohort::test
