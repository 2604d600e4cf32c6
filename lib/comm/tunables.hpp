#pragma once

// The communicator's environment tunables, declared in one place with their variable names.
//
//   COHORT_TIMEOUT  default op timeout in seconds (decimal allowed); 600 when unset
//   COHORT_DEBUG    "detail": fingerprint every collective and report cross-rank mismatches

#include <chrono>

namespace cohort::comm {

inline constexpr const char* kTimeoutVariable = "COHORT_TIMEOUT";
inline constexpr const char* kDebugVariable = "COHORT_DEBUG";
inline constexpr std::chrono::milliseconds kDefaultTimeout{std::chrono::seconds(600)};

struct Tunables {
  std::chrono::milliseconds timeout = kDefaultTimeout;
  bool debug_detail = false;
};

/// Reads the variables above. Throws Error(InvalidArgument) naming COHORT_TIMEOUT when it is not
/// a positive number; an unknown COHORT_DEBUG value is logged and ignored.
Tunables read_tunables();

}  // namespace cohort::comm
