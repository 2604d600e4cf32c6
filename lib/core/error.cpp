#include <cohort/error.hpp>

#include "core/check.hpp"
#include "core/system_error.hpp"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace cohort {

std::string_view error_code_name(ErrorCode code) noexcept {
  switch (code) {
    case ErrorCode::InvalidArgument: return "invalid_argument";
    case ErrorCode::InvalidUsage: return "invalid_usage";
    case ErrorCode::Unsupported: return "unsupported";
    case ErrorCode::Timeout: return "timeout";
    case ErrorCode::RemoteError: return "remote_error";
    case ErrorCode::SystemError: return "system_error";
    case ErrorCode::Internal: return "internal";
  }
  return "unknown";
}

namespace {

std::string full_message(const ErrorContext& context, const std::string& detail) {
  std::string prefix = format_context(context);
  if (prefix.empty()) return detail;
  return prefix + ": " + detail;
}

}  // namespace

std::string format_context(const ErrorContext& context) {
  if (context.op.empty()) return {};
  std::string text = context.op;
  if (context.sequence) text += " #" + std::to_string(*context.sequence);
  const std::string tag = context.tag ? "tag " + std::to_string(*context.tag) : std::string();
  if (context.to_rank && context.from_rank) {
    text += " (send to rank " + std::to_string(*context.to_rank) + ", recv from rank " +
            std::to_string(*context.from_rank) + (tag.empty() ? "" : ", " + tag) + ")";
  } else if (context.to_rank || context.from_rank) {
    text += context.to_rank ? " to rank " + std::to_string(*context.to_rank)
                            : " from rank " + std::to_string(*context.from_rank);
    if (!tag.empty()) text += " (" + tag + ")";
  }
  if (!context.algorithm.empty()) text += " (" + context.algorithm + ")";
  return text;
}

Error::Error(ErrorCode code, const std::string& message)
    : std::runtime_error(std::string(error_code_name(code)) + ": " + message),
      code_(code),
      detail_(message),
      message_(message) {}

Error::Error(ErrorCode code, std::string detail, ErrorContext context)
    : std::runtime_error(std::string(error_code_name(code)) + ": " + full_message(context, detail)),
      code_(code),
      detail_(std::move(detail)),
      context_(std::move(context)),
      message_(full_message(context_, detail_)) {}

Error Error::with_context(const ErrorContext& outer) const {
  ErrorContext merged = context_;
  if (!outer.op.empty()) {
    // The op's identity goes as a whole: a layer below may have named it otherwise.
    merged.op = outer.op;
    merged.sequence = outer.sequence;
    merged.to_rank = outer.to_rank;
    merged.from_rank = outer.from_rank;
    merged.tag = outer.tag;
  }
  if (outer.communicator) merged.communicator = outer.communicator;
  if (merged.algorithm.empty()) merged.algorithm = outer.algorithm;
  if (merged.peers.empty()) merged.peers = outer.peers;
  return Error(code_, detail_, std::move(merged));
}

Error system_error(const std::string& what, int err) {
  char buf[256];
  // GNU strerror_r may return a static string instead of filling buf.
  const char* text = strerror_r(err, buf, sizeof buf);
  const std::string message = what + ": " + text + " (errno " + std::to_string(err) + ")";
  const bool peer_gone = err == ECONNRESET || err == EPIPE || err == ECONNABORTED;
  return Error(peer_gone ? ErrorCode::RemoteError : ErrorCode::SystemError, message);
}

namespace detail {
void check_failed(const char* file, int line, const char* condition,
                  const std::string& detail) noexcept {
  std::fprintf(stderr, "cohort: internal check failed at %s:%d: %s%s%s\n", file, line, condition,
               detail.empty() ? "" : ": ", detail.c_str());
  std::fflush(stderr);
  std::abort();
}
}  // namespace detail

}  // namespace cohort
