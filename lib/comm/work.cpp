#include <cohort/error.hpp>
#include <cohort/work.hpp>

#include "comm/work_state.hpp"
#include "transport/wait_policy.hpp"

#include <fmt/format.h>

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>

namespace cohort {

namespace detail {

std::string describe(const PointToPointLabel& label) {
  return fmt::format("{} #{} {} rank {} (tag {})", label.is_send ? "send" : "recv", label.seq,
                     label.is_send ? "to" : "from", label.peer, label.user_tag);
}

void WorkState::complete(std::exception_ptr failure) noexcept {
  {
    std::lock_guard lock(mutex);
    error = std::move(failure);
    finished.store(true, std::memory_order_release);
  }
  finished_cv.notify_all();
}

}  // namespace detail

namespace {

/// One look at a device op (no-op for host ops, which their executor completes).
bool poll_device(detail::WorkState& state) {
  if (state.finished.load(std::memory_order_acquire)) return true;
  if (!state.device) return false;
  if (auto outcome = state.device->poll()) {
    // Whichever thread sees the outcome first completes the state; later ones find it finished.
    std::lock_guard lock(state.mutex);
    if (!state.finished.load(std::memory_order_relaxed)) {
      state.error = *outcome;
      state.finished.store(true, std::memory_order_release);
    }
    state.finished_cv.notify_all();
    return true;
  }
  return false;
}

/// Waits for a device op by polling its event: busily at first (most GPU collectives are short),
/// then yielding, then in 50 us naps so oversubscribed ranks keep their cores. The op's own
/// deadline ends it through poll(); `until` is the caller's.
void wait_device(detail::WorkState& state,
                 std::optional<std::chrono::steady_clock::time_point> until,
                 std::chrono::milliseconds timeout) {
  constexpr int kSpins = 1000;
  for (int polls = 0; !poll_device(state); ++polls) {
    if (until && std::chrono::steady_clock::now() >= *until) {
      throw Error(ErrorCode::Timeout, state.what() + " did not finish within the " +
                                          std::to_string(timeout.count()) +
                                          " ms given to Work::wait (the op keeps running)");
    }
    if (polls < kSpins) continue;
    if (polls < 2 * kSpins) {
      sched_yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
}

}  // namespace

bool Work::test() const {
  if (!state_) throw Error(ErrorCode::InvalidUsage, "Work::test on an empty Work");
  return poll_device(*state_);
}

void Work::make_stream_wait(Stream stream) const {
  if (!state_) throw Error(ErrorCode::InvalidUsage, "Work::make_stream_wait on an empty Work");
  if (!state_->device) {
    wait();  // a host op: nothing on a device to order after, so the host waits
    return;
  }
  if (poll_device(*state_)) {
    std::lock_guard lock(state_->mutex);
    if (state_->error) std::rethrow_exception(state_->error);
    return;  // finished: later work on any stream sees its data
  }
  state_->device->make_stream_wait(stream.handle);
}

std::optional<Error> Work::error() const {
  if (!state_) throw Error(ErrorCode::InvalidUsage, "Work::error on an empty Work");
  if (!poll_device(*state_)) return std::nullopt;
  std::exception_ptr failure;
  {
    std::lock_guard lock(state_->mutex);
    failure = state_->error;
  }
  if (!failure) return std::nullopt;
  try {
    std::rethrow_exception(failure);
  } catch (const Error& e) {
    return e;
  } catch (const std::exception& e) {
    return Error(ErrorCode::Internal, state_->what() + ": " + e.what());
  } catch (...) {
    return Error(ErrorCode::Internal, state_->what() + ": unknown exception");
  }
}

void Work::wait(std::optional<std::chrono::milliseconds> timeout) const {
  if (!state_) throw Error(ErrorCode::InvalidUsage, "Work::wait on an empty Work");
  if (timeout && timeout->count() < 0) {
    throw Error(ErrorCode::InvalidArgument,
                "Work::wait: timeout " + std::to_string(timeout->count()) + " ms is negative");
  }
  if (state_->device) {
    const auto start = std::chrono::steady_clock::now();
    wait_device(*state_, timeout ? std::optional(start + *timeout) : std::nullopt,
                timeout.value_or(std::chrono::milliseconds(0)));
    std::lock_guard lock(state_->mutex);
    if (state_->error) std::rethrow_exception(state_->error);
    return;
  }
  // Often finished already (a small send, an op the caller computed past): no clock read then.
  if (state_->finished.load(std::memory_order_acquire)) {
    std::lock_guard lock(state_->mutex);
    if (state_->error) std::rethrow_exception(state_->error);
    return;
  }
  // Poll first, yielding the core, for as long as the transport would: most ops finish within
  // that, and a condition-variable sleep/wake would add 25-35 us to each of them.
  const auto start = std::chrono::steady_clock::now();
  const auto poll_for =
      timeout ? std::min<std::chrono::steady_clock::duration>(*timeout, transport::kYieldPhase)
              : std::chrono::steady_clock::duration(transport::kYieldPhase);
  // With a core of its own, a wait first polls without yielding (see ProgressHook::spin).
  std::chrono::steady_clock::duration spin{0};
  if (const auto hook = state_->hook.lock()) spin = hook->spin;
  bool spinning = spin.count() > 0;
  // A clock read costs about as much as a poll: look at it every few rounds only.
  constexpr std::uint32_t kRoundsPerClockRead = 16;
  for (std::uint32_t round = 1;
       poll_for.count() > 0 && !state_->finished.load(std::memory_order_acquire); ++round) {
    if (round % kRoundsPerClockRead == 0) {
      const auto waited = std::chrono::steady_clock::now() - start;
      if (waited >= poll_for) break;
      spinning = spinning && waited < spin;
    }
    // Drive the communicator from this thread when nobody else is (the progress thread may be
    // asleep between polls); otherwise give the core to whoever is driving.
    if (const auto hook = state_->hook.lock()) {
      std::unique_lock helping(hook->mutex, std::try_to_lock);
      if (helping.owns_lock() && hook->help != nullptr) hook->help(hook->context);
    }
    if (!spinning && !state_->finished.load(std::memory_order_acquire)) sched_yield();
  }
  std::unique_lock lock(state_->mutex);
  const auto done = [this] { return state_->finished.load(std::memory_order_relaxed); };
  if (timeout) {
    if (!state_->finished_cv.wait_for(lock, *timeout, done)) {
      throw Error(ErrorCode::Timeout, state_->what() + " did not finish within the " +
                                          std::to_string(timeout->count()) +
                                          " ms given to Work::wait (the op keeps running)");
    }
  } else {
    state_->finished_cv.wait(lock, done);
  }
  if (state_->error) std::rethrow_exception(state_->error);
}

}  // namespace cohort
