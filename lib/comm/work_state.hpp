#pragma once

// The shared state behind a Work handle: filled in once by whichever thread ran the op.

#include <atomic>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <string>

namespace cohort::detail {

struct WorkState {
  explicit WorkState(std::string op_what) : what(std::move(op_what)) {}

  /// Marks the op finished, with `failure` null on success, and wakes every waiter. Called once.
  void complete(std::exception_ptr failure) noexcept;

  /// "allreduce #17", for Work::wait's timeout message.
  const std::string what;
  std::mutex mutex;
  std::condition_variable finished_cv;
  /// Read without the mutex by Work::test(); written under it.
  std::atomic<bool> finished{false};
  std::exception_ptr error;  ///< guarded by mutex; immutable once finished
};

}  // namespace cohort::detail
