#pragma once

// DeviceCompletion: the end of one op on device buffers, as its Work sees it. The op finished
// when the event recorded after it on its stream is done; it failed when the backend failed
// first (NCCL error, timeout of this or another op, abort()). Polled by Work::test/wait and by
// the backend's watchdog; whoever sees the end first reports it, once, through OnFinish.

#include <cohort/error.hpp>

#include "comm/work_state.hpp"
#include "gpu/device_runtime.hpp"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

namespace cohort::gpu {

class DeviceCompletion;

/// What a backend and its outstanding ops share. Its mutex serialises NCCL calls on the
/// communicator once it exists (launches, asynchronous-error polls, abort, split, finalise) and
/// guards every field but `stopping`. The communicator's creation, the longest wait on peers,
/// runs without it, so abort() is not held up by a peer that never comes to the first GPU op.
struct DeviceCore {
  explicit DeviceCore(DeviceRuntime& rt) : runtime(rt) {}

  /// Where the NCCL communicator is: none yet, being created by one thread (without the mutex:
  /// the creation waits on the peers), or created (`comm` usable unless `failure`).
  enum class SetUp { None, InProgress, Ready };

  DeviceRuntime& runtime;
  std::mutex mutex;
  NcclHandle comm{};
  bool has_comm = false;
  SetUp set_up = SetUp::None;
  /// Notified when `set_up` leaves InProgress and when `failure` is set.
  std::condition_variable set_up_changed;
  /// Set with `failure`; read without the mutex by a set-up in progress, which then gives up.
  std::atomic<bool> stopping{false};
  /// The first failure; once set, the NCCL communicator is aborted and never used again.
  std::optional<Error> failure;
  std::vector<std::shared_ptr<DeviceCompletion>> outstanding;
  std::vector<EventHandle> spare_events;

  /// Fails the backend with `cause` unless it already failed, aborting the NCCL communicator.
  /// Returns the failure that stays. Takes the mutex; never throws.
  Error fail(const Error& cause) noexcept;
  /// The same with the mutex already held.
  Error fail_locked(const Error& cause) noexcept;
  /// An event for a new op (reused from finished ones); mutex held.
  EventHandle take_event_locked();
};

class DeviceCompletion final : public detail::DeviceSync {
 public:
  /// Called once with the op's failure (null: success) before anyone sees it finished.
  using OnFinish = std::function<void(const Error* failure)>;

  DeviceCompletion(std::weak_ptr<DeviceCore> core, EventHandle event,
                   std::chrono::steady_clock::time_point deadline,
                   std::chrono::milliseconds timeout, ErrorContext context, OnFinish on_finish,
                   std::vector<std::shared_ptr<void>> keepalive);
  ~DeviceCompletion() override;

  std::optional<std::exception_ptr> poll() noexcept override;
  void make_stream_wait(std::uintptr_t stream) override;
  bool finished() const noexcept { return finished_.load(std::memory_order_acquire); }

 private:
  /// Records the outcome, reports it and releases the event and buffers (mutex_ held).
  void finish_locked(const Error* failure) noexcept;
  /// The op's own error for a backend that failed for another reason.
  Error failed_with(const Error& cause) const;

  std::weak_ptr<DeviceCore> core_;
  EventHandle event_;
  const std::chrono::steady_clock::time_point deadline_;
  const std::chrono::milliseconds timeout_;
  const ErrorContext context_;
  OnFinish on_finish_;
  std::vector<std::shared_ptr<void>> keepalive_;

  std::mutex mutex_;
  std::exception_ptr outcome_;  ///< written under mutex_ before finished_ is set
  std::atomic<bool> finished_{false};
};

}  // namespace cohort::gpu
