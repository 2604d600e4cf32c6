#pragma once

// Communicator::abort() reaching the waits below it: once raised, every wait on the transport or
// the shared arena, running or future, throws instead of waiting out its deadline. Raised from
// any thread; waits check it once per polling round (a relaxed-cost acquire load). The same
// check point does the communicator's side work (side_work.hpp), since every wait reaches it.

#include <cohort/error.hpp>

#include "transport/side_work.hpp"

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
  /// Between a wait's polling rounds, on the driving thread: serves the side work asked of the
  /// driver, then throws if raised (the side work may have raised it).
  void check(const std::string& what, WaitKind wait) const {
    if (side_work_ != nullptr) side_work_->serve_if_asked(wait);
    if (raised()) throw_error(what);
  }
  /// Who serves between rounds (null: nobody). Set by the owner of the waits' communicator
  /// before its first op and cleared before it goes; not while a wait runs.
  void set_side_work(SideWork* side_work) noexcept { side_work_ = side_work; }
  /// Error(InvalidUsage) for the op named `what`, with the raiser's message ("aborted:
  /// <reason>" from Communicator::abort(); "interrupted by an earlier failure: ..." when another
  /// op's failure poisoned the communicator).
  [[noreturn]] void throw_error(const std::string& what) const {
    throw Error(ErrorCode::InvalidUsage, reason_.empty() ? std::string("aborted") : reason_,
                ErrorContext{.op = what});
  }

 private:
  std::atomic<bool> claimed_{false};
  std::atomic<bool> raised_{false};
  std::string reason_;  ///< written once, before raised_ is set
  SideWork* side_work_ = nullptr;
};

}  // namespace cohort::transport
