#pragma once

// How the C ABI reports failures: every entry point runs its body through guarded(), which turns
// any exception into a cohort_status_t and records its message as this thread's last error. No
// exception leaves an extern "C" function.

#include <cohort/cohort.h>
#include <cohort/error.hpp>

#include <string>

namespace cohort::capi {

/// The status mirroring `code` (one to one, see cohort.h).
cohort_status_t status_of(ErrorCode code) noexcept;

/// Classifies the exception being handled (call only inside a catch block) and records its
/// message as this thread's last error: cohort::Error keeps its code and message, std::bad_alloc
/// is COHORT_ERROR_SYSTEM ("out of memory in <function>"), anything else COHORT_ERROR_INTERNAL
/// naming `function`, the C entry point.
cohort_status_t status_of_current_exception(const char* function) noexcept;

/// Runs `body` and returns COHORT_OK, or the status of whatever it threw.
template <class Body>
cohort_status_t guarded(const char* function, Body&& body) noexcept {
  try {
    body();
    return COHORT_OK;
  } catch (...) {
    return status_of_current_exception(function);
  }
}

/// Throws Error(InvalidArgument) with "<function>: <message>".
[[noreturn]] void invalid_argument(const char* function, const std::string& message);

/// Throws InvalidArgument naming `name` when an out-parameter is NULL.
template <class T>
void require_out(T* out, const char* function, const char* name) {
  if (out == nullptr) invalid_argument(function, std::string(name) + " (out-parameter) is NULL");
}

}  // namespace cohort::capi
