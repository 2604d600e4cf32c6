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
/// optional: an error outside any op has none, a layer below the communicator knows only the
/// peers, the communicator adds the op, its number and the algorithm that ran. Whichever path
/// failed an op (its own wait, another op's, the poisoning that ended it queued or in flight,
/// Work::wait's timeout), `op` is the bare name, and its number, counterpart and tag are fields
/// of their own; a label such as "recv #4 from rank 0 (tag 7)" is only ever the message's
/// prefix (format_context). Arguments refused before an op is numbered name it in the message
/// only.
struct ErrorContext {
  std::string op;  ///< "allreduce", "send", "sendrecv", ... (empty: not an op)
  /// The op's number on its communicator. Collectives and sends/receives are numbered apart
  /// (each from 0): "allreduce" 3 and "send" 3 are different ops.
  std::optional<std::uint32_t> sequence;
  std::optional<std::uint32_t> communicator;  ///< the communicator's id
  std::string algorithm;                      ///< the algorithm that was running (empty: none)
  std::vector<int> peers;                     ///< ranks the failure concerns (dead, awaited, ...)
  std::optional<int> to_rank;                 ///< a send's destination (send, sendrecv)
  std::optional<int> from_rank;               ///< a receive's source (recv, sendrecv)
  std::optional<int> tag;                     ///< a send's or receive's tag
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

  /// This error with `outer`'s fields added: the op's fields (op, sequence, to_rank, from_rank,
  /// tag) are taken from `outer` together when it names an op, and its communicator when it has
  /// one (the caller knows the op better than a layer below did);
  /// algorithm and peers only fill fields still empty here. The message is formatted again.
  Error with_context(const ErrorContext& outer) const;

 private:
  ErrorCode code_;
  std::string detail_;
  ErrorContext context_;
  std::string message_;
};

/// The op's name from a context's fields, empty when it has no op: "allreduce #17 (ring)",
/// "send #3 to rank 1 (tag 7)", "recv #4 from rank 0 (tag 7)",
/// "sendrecv #5 (send to rank 1, recv from rank 2, tag 7)".
std::string format_context(const ErrorContext& context);

}  // namespace cohort
