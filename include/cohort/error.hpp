#pragma once

/// Errors raised by cohort. Every failure that a caller can cause or observe is a cohort::Error
/// carrying an ErrorCode; broken internal invariants abort instead (see lib/core/check.hpp).

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

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

/// Where an error happened, as fields (never parsed out of message text). Every field is
/// optional: an error outside any op has none, a transport failure knows only the op's label and
/// the peers, the communicator adds the op, its sequence number and the algorithm that ran.
struct ErrorContext {
  std::string op;                             ///< "allreduce", "send", ... (empty: not an op)
  std::optional<std::uint32_t> sequence;      ///< the op's number on its communicator
  std::optional<std::uint32_t> communicator;  ///< the communicator's id
  std::string algorithm;                      ///< the algorithm that was running (empty: none)
  std::vector<int> peers;                     ///< ranks the failure concerns (dead, awaited, ...)
};

/// The one exception type cohort throws. what() is "<code name>: <message>".
class Error : public std::runtime_error {
 public:
  /// An error without context: message() is `message`.
  Error(ErrorCode code, const std::string& message);
  /// message() is the context's prefix ("allreduce #17 (ring)") then ": " and `detail`.
  Error(ErrorCode code, std::string detail, ErrorContext context);

  ErrorCode code() const noexcept { return code_; }
  /// The message without the code prefix: the context's prefix, if any, and the detail.
  const std::string& message() const noexcept { return message_; }
  /// What went wrong, without the context's prefix.
  const std::string& detail() const noexcept { return detail_; }
  const ErrorContext& context() const noexcept { return context_; }

  /// This error with `outer`'s fields added: op, sequence and communicator are taken from
  /// `outer` when it has them (the caller knows the op better than a layer below did);
  /// algorithm and peers only fill fields still empty here. The message is formatted again.
  Error with_context(const ErrorContext& outer) const;

 private:
  ErrorCode code_;
  std::string detail_;
  ErrorContext context_;
  std::string message_;
};

/// "allreduce #17 (ring)" from a context's op, sequence and algorithm; empty when it has no op.
std::string format_context(const ErrorContext& context);

}  // namespace cohort
