#pragma once

// Helpers shared by the loss-scaler and FP8-scaling tests, which run inside cohort::launch()
// children (see comm/rank_checks.hpp for how a child reports a failed check).

#include <cohort/buffer.hpp>
#include <cohort/communicator.hpp>

#include <chrono>
#include <cstring>
#include <limits>
#include <memory>
#include <vector>

#include "comm/rank_checks.hpp"

namespace cohort::test {

inline constexpr float kInf = std::numeric_limits<float>::infinity();
inline constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

/// The world, with a deadline short enough that a peer missing from an agreement fails the test
/// in seconds, not minutes.
inline std::shared_ptr<Communicator> test_world(const Environment& env) {
  CommunicatorOptions options;
  options.timeout = std::chrono::seconds(20);
  return world(env, options);
}

/// A new host buffer holding `values`.
template <class T>
Buffer owned(const std::vector<T>& values, DType dtype) {
  Buffer b = Buffer::allocate(values.size(), dtype);
  if (!values.empty()) std::memcpy(b.data(), values.data(), values.size() * sizeof(T));
  return b;
}

}  // namespace cohort::test
