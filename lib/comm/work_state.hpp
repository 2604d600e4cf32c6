#pragma once

// The shared state behind a Work handle: filled in once by whichever thread ran the op.

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

namespace cohort::detail {

/// Lets a thread waiting on a Work drive its communicator's progress itself instead of waiting
/// for the progress thread to notice a completion and wake it: each of those handoffs costs
/// 25-35 us here. The executor clears `help` (under `mutex`) before it goes away.
struct ProgressHook {
  std::mutex mutex;
  void (*help)(void* context) noexcept = nullptr;  ///< runs one drive step if nobody is driving
  void* context = nullptr;
};

/// An op on device buffers: it finishes on a GPU stream, so no thread completes its Work by
/// itself. Work::test/wait poll it (and the GPU backend's watchdog does, for ops nobody waits on).
struct DeviceSync {
  virtual ~DeviceSync() = default;
  /// One look, never blocking: nothing while the op runs, else its outcome (a null pointer for
  /// success). Enforces the op's deadline: past it, the op fails (and its NCCL communicator is
  /// aborted).
  virtual std::optional<std::exception_ptr> poll() noexcept = 0;
  /// Work queued on `stream` after this call waits for the op on the device.
  virtual void make_stream_wait(std::uintptr_t stream) = 0;
};

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
  /// The executor that runs the op, for Work::wait to help along; empty once it is gone.
  std::weak_ptr<ProgressHook> hook;
  /// Set for an op on device buffers (then hook is empty): polled for completion.
  std::shared_ptr<DeviceSync> device;
};

}  // namespace cohort::detail
