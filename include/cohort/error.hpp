#pragma once

/// Errors raised by cohort. Every failure that a caller can cause or observe is a cohort::Error
/// carrying an ErrorCode; broken internal invariants abort instead (see lib/core/check.hpp).

#include <stdexcept>
#include <string>
#include <string_view>

namespace cohort {

/// What kind of failure an Error reports. Callers branch on this, never on message text.
enum class ErrorCode {
  InvalidArgument,  ///< a value passed in is wrong (dtype, count, device, rank, root, shape ...)
  InvalidUsage,     ///< the call is not allowed in this state (poisoned communicator, ...)
  Unsupported,      ///< valid but not built or not implemented for this combination
  Timeout,          ///< a deadline passed; the message names what was still missing
  RemoteError,      ///< a peer died, aborted or closed its connection
  SystemError,      ///< the OS or a library below us failed (errno, UCX, NCCL, CUDA status)
  Internal,         ///< a bug in cohort that could be reported rather than aborted on
};

/// Stable lower-case name of a code ("invalid_argument", "timeout", ...).
std::string_view error_code_name(ErrorCode code) noexcept;

/// The one exception type cohort throws. what() is "<code name>: <message>".
class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message);

  ErrorCode code() const noexcept { return code_; }
  /// The message without the code prefix.
  const std::string& message() const noexcept { return message_; }

 private:
  ErrorCode code_;
  std::string message_;
};

}  // namespace cohort
