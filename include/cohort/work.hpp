#pragma once

/// Work: the handle an asynchronous collective returns.

#include <cohort/error.hpp>
#include <cohort/stream.hpp>

#include <chrono>
#include <memory>
#include <optional>

namespace cohort {

/// The longest timeout an op, a communicator's default or Work::wait accepts: one year, as for
/// COHORT_TIMEOUT. A deadline is a clock reading plus the timeout, which must stay in range.
inline constexpr std::chrono::milliseconds kMaxTimeout{std::chrono::hours(24 * 365)};

namespace detail {
struct WorkState;
}

class Work {
 public:
  Work() = default;
  explicit Work(std::shared_ptr<detail::WorkState> state) : state_(std::move(state)) {}

  /// True once the operation finished (successfully or not). Never blocks.
  bool test() const;
  /// Blocks until the operation finished, rethrowing its error. With a timeout, throws
  /// Error(Timeout) if it has not finished by then (the operation itself keeps its own deadline
  /// and is not cancelled). Waiting again after success returns at once. A negative timeout or
  /// one above kMaxTimeout is InvalidArgument (nullopt waits without one).
  void wait(std::optional<std::chrono::milliseconds> timeout = std::nullopt) const;
  /// The op's error once it finished with one; nullopt while it runs or after success. Never
  /// blocks and never throws the error (an exception that is not a cohort::Error is reported
  /// as Error(Internal) with its what()).
  std::optional<Error> error() const;
  /// Orders work queued on `stream` after this op, without blocking the host: for an op on
  /// device buffers, the stream waits on the device for the op's completion. For an op on host
  /// buffers there is nothing to order on a device, so this waits like wait() (then returns).
  /// Throws the op's error if it already failed.
  void make_stream_wait(Stream stream) const;
  /// False for a default-constructed Work.
  bool valid() const noexcept { return static_cast<bool>(state_); }

 private:
  std::shared_ptr<detail::WorkState> state_;
};

}  // namespace cohort
