#include "gpu/device_completion.hpp"

#include "core/log.hpp"

#include <fmt/format.h>

#include <string_view>

namespace cohort::gpu {

Error DeviceCore::fail(const Error& cause) noexcept {
  std::lock_guard lock(mutex);
  return fail_locked(cause);
}

Error DeviceCore::fail_locked(const Error& cause) noexcept {
  if (failure) return *failure;
  failure = cause;
  // A set-up in progress on another thread sees this and gives up; threads waiting for it wake.
  stopping.store(true, std::memory_order_release);
  set_up_changed.notify_all();
  if (has_comm) {
    // Ends the NCCL kernels still queued or running, so no stream stays blocked on a peer that
    // will never come; the communicator is freed by the abort.
    runtime.nccl_abort(comm);
    has_comm = false;
    comm = NcclHandle{};
    // Only then: a communicator that never ran a device op has no NCCL communicator, and its
    // own failure is logged already.
    COHORT_LOG_ERROR("GPU backend failed; its NCCL communicator was aborted: {}", cause.what());
  }
  return cause;
}

EventHandle DeviceCore::take_event_locked() {
  if (spare_events.empty()) return runtime.create_event();
  const EventHandle event = spare_events.back();
  spare_events.pop_back();
  return event;
}

DeviceCompletion::DeviceCompletion(std::weak_ptr<DeviceCore> core, EventHandle event,
                                   std::chrono::steady_clock::time_point deadline,
                                   std::chrono::milliseconds timeout, ErrorContext context,
                                   OnFinish on_finish, std::vector<std::shared_ptr<void>> keepalive)
    : core_(std::move(core)),
      event_(event),
      deadline_(deadline),
      timeout_(timeout),
      context_(std::move(context)),
      on_finish_(std::move(on_finish)),
      keepalive_(std::move(keepalive)) {}

DeviceCompletion::~DeviceCompletion() = default;

Error DeviceCompletion::failed_with(const Error& cause) const {
  return Error(ErrorCode::InvalidUsage,
               fmt::format("the GPU path of this communicator failed before this op finished: {}",
                           cause.what()),
               context_);
}

std::optional<std::exception_ptr> DeviceCompletion::poll() noexcept {
  if (finished_.load(std::memory_order_acquire)) return outcome_;
  std::unique_lock lock(mutex_, std::try_to_lock);
  if (!lock.owns_lock()) return std::nullopt;  // another thread is looking right now
  if (finished_.load(std::memory_order_relaxed)) return outcome_;
  try {
    const std::shared_ptr<DeviceCore> core = core_.lock();
    if (!core) {
      // The backend drains its ops before it goes, so this is a bug, reported rather than hung.
      const Error gone(ErrorCode::Internal, "the GPU backend was destroyed before this op ended",
                       context_);
      finish_locked(&gone);
      return outcome_;
    }
    std::optional<Error> earlier;
    {
      std::lock_guard core_lock(core->mutex);
      earlier = core->failure;
    }
    if (earlier) {
      const Error mine = failed_with(*earlier);
      finish_locked(&mine);
      return outcome_;
    }
    if (core->runtime.query_event(event_) == EventState::Done) {
      finish_locked(nullptr);
      return outcome_;
    }
    NcclAsyncState state;
    {
      std::lock_guard core_lock(core->mutex);
      if (core->has_comm) state = core->runtime.nccl_async_state(core->comm);
    }
    std::optional<Error> failure;
    if (state.kind == NcclAsyncState::Failed) {
      failure =
          Error(state.remote ? ErrorCode::RemoteError : ErrorCode::SystemError,
                "NCCL reported an error (" + state.message + "); the NCCL communicator was aborted",
                context_);
    } else if (std::chrono::steady_clock::now() >= deadline_) {
      failure = Error(ErrorCode::Timeout,
                      fmt::format("the GPU op did not finish within {} ms (a peer may be dead, "
                                  "stuck, or not calling the same op); the NCCL communicator was "
                                  "aborted",
                                  timeout_.count()),
                      context_);
    }
    if (failure) {
      const Error stays = core->fail(*failure);
      if (std::string_view(stays.what()) == failure->what()) {
        finish_locked(&*failure);
      } else {
        const Error mine = failed_with(stays);
        finish_locked(&mine);
      }
      return outcome_;
    }
    return std::nullopt;
  } catch (const Error& e) {
    // A device error from the event query: the op's own failure, which fails the backend too.
    const std::shared_ptr<DeviceCore> core = core_.lock();
    const Error mine = e.with_context(context_);
    if (core) core->fail(mine);
    finish_locked(&mine);
    return outcome_;
  } catch (const std::exception& e) {
    const Error mine(ErrorCode::Internal, e.what(), context_);
    finish_locked(&mine);
    return outcome_;
  }
}

void DeviceCompletion::finish_locked(const Error* failure) noexcept {
  try {
    outcome_ = failure ? std::make_exception_ptr(*failure) : nullptr;
  } catch (...) {
    outcome_ = std::current_exception();
  }
  // Reported before anyone can see the op finished: a caller woken by the failure finds the
  // communicator already poisoned and the flight record written.
  if (on_finish_) on_finish_(failure);
  on_finish_ = nullptr;
  keepalive_.clear();
  if (const std::shared_ptr<DeviceCore> core = core_.lock()) {
    std::lock_guard core_lock(core->mutex);
    try {
      core->spare_events.push_back(event_);
    } catch (...) {
      core->runtime.destroy_event(event_);
    }
  }
  finished_.store(true, std::memory_order_release);
}

void DeviceCompletion::make_stream_wait(std::uintptr_t stream) {
  std::lock_guard lock(mutex_);
  if (finished_.load(std::memory_order_relaxed)) {
    if (outcome_) std::rethrow_exception(outcome_);
    return;
  }
  const std::shared_ptr<DeviceCore> core = core_.lock();
  if (!core)
    throw Error(ErrorCode::Internal, "the GPU backend was destroyed before this op ended",
                context_);
  core->runtime.stream_wait_event(StreamHandle{stream}, event_);
}

}  // namespace cohort::gpu
