#include "transport/wait_policy.hpp"

#include <algorithm>

namespace cohort::transport {

WaitPolicy choose_wait_policy(int local_world_size, unsigned hardware_threads,
                              std::optional<std::chrono::microseconds> spin_override) {
  const unsigned threads = std::max(1u, hardware_threads);
  const unsigned ranks = static_cast<unsigned>(std::max(1, local_world_size));
  WaitPolicy policy;
  policy.yield_while_spinning = ranks > threads;
  policy.spin = policy.yield_while_spinning ? kOversubscribedSpin : kDedicatedCoreSpin;
  if (spin_override) policy.spin = *spin_override;
  return policy;
}

}  // namespace cohort::transport
