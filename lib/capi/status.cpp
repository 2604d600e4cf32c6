// Status codes, the thread-local last error message and the library's version string.

#include "capi/status.hpp"

#include "capi/enum_bits.hpp"

#include <cohort/version.hpp>

#include <new>
#include <stdexcept>
#include <string>

namespace cohort::capi {
namespace {

// What cohort_last_error_message() returns: the stored message, or a static text when storing
// it failed. Thread-local so that concurrent callers each see their own failure; only a failing
// call writes them.
thread_local std::string t_message;
thread_local const char* t_last_error = "";

constexpr const char* kMessageLost =
    "out of memory while recording the error message (the status is still accurate)";

}  // namespace

cohort_status_t status_of(ErrorCode code) noexcept {
  switch (code) {
    case ErrorCode::InvalidArgument: return COHORT_ERROR_INVALID_ARGUMENT;
    case ErrorCode::InvalidUsage: return COHORT_ERROR_INVALID_USAGE;
    case ErrorCode::Unsupported: return COHORT_ERROR_UNSUPPORTED;
    case ErrorCode::Timeout: return COHORT_ERROR_TIMEOUT;
    case ErrorCode::RemoteError: return COHORT_ERROR_REMOTE;
    case ErrorCode::SystemError: return COHORT_ERROR_SYSTEM;
    case ErrorCode::Internal: return COHORT_ERROR_INTERNAL;
  }
  return COHORT_ERROR_INTERNAL;
}

cohort_status_t status_of_current_exception(const char* function) noexcept {
  cohort_status_t status = COHORT_ERROR_INTERNAL;
  // The status is decided before any message is built, so running out of memory while
  // building or storing the message loses only the message.
  try {
    try {
      throw;
    } catch (const Error& e) {
      status = status_of(e.code());
      t_message = e.message();
    } catch (const std::bad_alloc&) {
      status = COHORT_ERROR_SYSTEM;
      t_message = std::string("out of memory in ") + function;
    } catch (const std::exception& e) {
      t_message = std::string(function) + ": unexpected exception: " + e.what();
    } catch (...) {
      t_message = std::string(function) + ": unexpected exception not derived from std::exception";
    }
    t_last_error = t_message.c_str();
  } catch (...) {
    t_last_error = kMessageLost;
  }
  return status;
}

void invalid_argument(const char* function, const std::string& message) {
  throw Error(ErrorCode::InvalidArgument, std::string(function) + ": " + message);
}

}  // namespace cohort::capi

extern "C" {

const char* cohort_last_error_message(void) {
  return cohort::capi::t_last_error;
}

const char* cohort_status_name(cohort_status_t status) {
  switch (cohort::capi::enum_bits(status)) {
    case COHORT_OK: return "ok";
    case COHORT_ERROR_INVALID_ARGUMENT: return "invalid_argument";
    case COHORT_ERROR_INVALID_USAGE: return "invalid_usage";
    case COHORT_ERROR_UNSUPPORTED: return "unsupported";
    case COHORT_ERROR_TIMEOUT: return "timeout";
    case COHORT_ERROR_REMOTE: return "remote_error";
    case COHORT_ERROR_SYSTEM: return "system_error";
    case COHORT_ERROR_INTERNAL: return "internal";
  }
  return "unknown";
}

const char* cohort_version(void) {
  return cohort::kVersion;
}

}  // extern "C"
