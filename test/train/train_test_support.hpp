#pragma once

// Helpers shared by the training layer's multi-rank tests, which run inside cohort::launch()
// children (see comm/rank_checks.hpp for how a child reports a failed check).

#include <cohort/buffer.hpp>
#include <cohort/communicator.hpp>
#include <cohort/error.hpp>

#include <chrono>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
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

/// Requires fn to throw a std::runtime_error (not a cohort::Error) whose what() is `text`: a
/// rank whose own callback threw gets that very exception back.
inline void expect_own_exception(const std::function<void()>& fn, const std::string& text,
                                 const std::string& where) {
  try {
    fn();
  } catch (const Error& e) {
    RANK_CHECK(false, where << ": got a cohort::Error instead of fn's exception: " << e.what());
  } catch (const std::runtime_error& e) {
    RANK_CHECK(std::string(e.what()) == text, where << ": got " << e.what());
    return;
  }
  RANK_CHECK(false, where << ": no exception");
}

}  // namespace cohort::test
