#pragma once

// Bad input from the caller: cohort::Error(InvalidArgument), thrown before any work starts.
// One definition for the library, so files need no local copy (and can share a unity build).

#include <cohort/error.hpp>

#include <string>

namespace cohort {

[[noreturn]] inline void invalid_argument(const std::string& message) {
  throw Error(ErrorCode::InvalidArgument, message);
}

}  // namespace cohort
