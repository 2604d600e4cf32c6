#pragma once

// Communicator::abort() reaching the waits below it: once raised, every wait on the transport or
// the shared arena, running or future, throws instead of waiting out its deadline. Raised from
// any thread; waits check it once per polling round (a relaxed-cost acquire load).

#include <cohort/error.hpp>

#include <atomic>
#include <string>

namespace cohort::transport {

class Interruption {
 public:
  /// The first call wins; later ones are ignored. Never throws (an allocation failure leaves the
  /// reason empty, the interruption still happens).
  void raise(const std::string& reason) noexcept {
    if (claimed_.exchange(true)) return;
    try {
      reason_ = reason;
    } catch (...) {
    }
    raised_.store(true, std::memory_order_release);
  }
  bool raised() const noexcept { return raised_.load(std::memory_order_acquire); }
  /// Error(InvalidUsage) for the op named `what` ("aborted: <reason>").
  [[noreturn]] void throw_error(const std::string& what) const {
    throw Error(ErrorCode::InvalidUsage, "aborted: " + (reason_.empty() ? "abort()" : reason_),
                ErrorContext{.op = what});
  }

 private:
  std::atomic<bool> claimed_{false};
  std::atomic<bool> raised_{false};
  std::string reason_;  ///< written once, before raised_ is set
};

}  // namespace cohort::transport
