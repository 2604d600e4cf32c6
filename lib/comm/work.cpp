#include <cohort/error.hpp>
#include <cohort/work.hpp>

#include "comm/work_state.hpp"
#include "transport/wait_policy.hpp"

#include <fmt/format.h>

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>

namespace cohort {

namespace detail {

ErrorContext context_of(const CollectiveLabel& label) {
  return ErrorContext{.op = std::string(collective_name(label.kind)),
                      .sequence = label.seq,
                      .communicator = label.communicator,
                      .algorithm = label.forced == Algorithm::Auto
                                       ? std::string()
                                       : std::string(algorithm_name(label.forced))};
}

ErrorContext context_of(const PointToPointLabel& label) {
  ErrorContext context{.op = label.is_send ? "send" : "recv",
                       .sequence = label.seq,
                       .communicator = label.communicator,
                       .tag = label.user_tag};
  (label.is_send ? context.to_rank : context.from_rank) = label.peer;
  return context;
}

void WorkState::complete(std::exception_ptr failure) noexcept {
  error = std::move(failure);
  finished.store(true, std::memory_order_seq_cst);
  if (sleepers.load(std::memory_order_seq_cst) == 0) return;
  // A sleeper checked `finished` under the mutex before it slept: taking the mutex here waits
  // until it sleeps, so the notification cannot slip in between.
  { std::lock_guard lock(mutex); }
  finished_cv.notify_all();
}

const std::shared_ptr<WorkState>& finished_work() noexcept {
  struct Finished : WorkState {
    Finished() : WorkState(PointToPointLabel{true, 0, 0, 0}) {
      finished.store(true, std::memory_order_relaxed);
    }
  };
  // Never destroyed, so a Work still held while statics are torn down at exit stays valid.
  static Finished& state = *new Finished;
  // Owns nothing (the aliasing constructor with an empty owner): copying and dropping it touch
  // no reference count.
  static const std::shared_ptr<WorkState> finished(std::shared_ptr<void>(), &state);
  return finished;
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
      throw Error(ErrorCode::Timeout,
                  "did not finish within the " + std::to_string(timeout.count()) +
                      " ms given to Work::wait (the op keeps running)",
                  state.context());
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
    return Error(ErrorCode::Internal, e.what(), state_->context());
  } catch (...) {
    return Error(ErrorCode::Internal, "unknown exception", state_->context());
  }
}

void Work::wait(std::optional<std::chrono::milliseconds> timeout) const {
  if (!state_) throw Error(ErrorCode::InvalidUsage, "Work::wait on an empty Work");
  if (timeout && (timeout->count() < 0 || *timeout > kMaxTimeout)) {
    throw Error(ErrorCode::InvalidArgument,
                "Work::wait: timeout " + std::to_string(timeout->count()) +
                    " ms is not between 0 and one year (" + std::to_string(kMaxTimeout.count()) +
                    " ms); wait without a timeout instead");
  }
  if (state_->fork_generation != fork_generation() &&
      !state_->finished.load(std::memory_order_acquire))
    throw Error(ErrorCode::InvalidUsage,
                "Work::wait: " + state_->what() +
                    " was started by the process this one was forked from; nothing finishes it "
                    "here",
                state_->context());
  if (state_->device) {
    const auto start = std::chrono::steady_clock::now();
    wait_device(*state_, timeout ? std::optional(start + *timeout) : std::nullopt,
                timeout.value_or(std::chrono::milliseconds(0)));
    if (state_->error) std::rethrow_exception(state_->error);  // immutable once finished
    return;
  }
  // Often finished already (a small send, an op the caller computed past): no clock read and
  // no lock then.
  if (state_->finished.load(std::memory_order_acquire)) {
    if (state_->error) std::rethrow_exception(state_->error);
    return;
  }
  // Poll first, yielding the core, for as long as the transport would: most ops finish within
  // that, and a condition-variable sleep/wake would add 25-35 us to each of them.
  const auto poll_for =
      timeout ? std::min<std::chrono::steady_clock::duration>(*timeout, transport::kYieldPhase)
              : std::chrono::steady_clock::duration(transport::kYieldPhase);
  // The timeout counts from here, polling included (the clock read is only paid with one).
  const std::optional<std::chrono::steady_clock::time_point> give_up =
      timeout ? std::optional(std::chrono::steady_clock::now() + *timeout) : std::nullopt;
  // Held for the whole wait: the executor going away clears `help` under the hook's mutex, so
  // keeping the hook itself alive is safe.
  const std::shared_ptr<detail::ProgressHook> hook = state_->hook.lock();
  // Its mutex, once taken, is kept until the polling ends: a lock and an unlock per poll were a
  // tenth of a small send/recv. Another thread waiting on the same executor meanwhile yields
  // instead of helping (only one thread can drive at a time anyway), and the executor's
  // destructor waits at most the polling phase.
  std::unique_lock<std::mutex> helping;
  // With a core of its own, a wait first polls without yielding (see ProgressHook::spin).
  const std::chrono::steady_clock::duration spin = hook ? hook->spin : std::chrono::microseconds(0);
  bool spinning = spin.count() > 0;
  // A clock read costs about as much as a poll: look at it every few rounds only, and start the
  // count at the first look (most waits end before it), so the phases run a few polls long.
  constexpr std::uint32_t kRoundsPerClockRead = 16;
  std::optional<std::chrono::steady_clock::time_point> start;
  for (std::uint32_t round = 1;
       poll_for.count() > 0 && !state_->finished.load(std::memory_order_acquire); ++round) {
    if (round % kRoundsPerClockRead == 0) {
      const auto now = std::chrono::steady_clock::now();
      if (!start) start = now;
      const auto waited = now - *start;
      if (waited >= poll_for) break;
      spinning = spinning && waited < spin;
    }
    // Drive the communicator from this thread when nobody else is (the progress thread may be
    // asleep between polls); otherwise give the core to whoever is driving.
    if (hook) {
      if (!helping.owns_lock()) helping = std::unique_lock(hook->mutex, std::try_to_lock);
      if (helping.owns_lock() && hook->help != nullptr) hook->help(hook->context);
    }
    if (!spinning && !state_->finished.load(std::memory_order_acquire)) sched_yield();
  }
  if (helping.owns_lock()) helping.unlock();
  if (state_->finished.load(std::memory_order_acquire)) {
    if (state_->error) std::rethrow_exception(state_->error);
    return;
  }
  // Counted as a sleeper before looking at `finished` (see WorkState::sleepers).
  state_->sleepers.fetch_add(1, std::memory_order_seq_cst);
  bool finished = false;
  {
    std::unique_lock lock(state_->mutex);
    const auto done = [this] { return state_->finished.load(std::memory_order_seq_cst); };
    finished = give_up ? state_->finished_cv.wait_until(lock, *give_up, done)
                       : (state_->finished_cv.wait(lock, done), true);
  }
  state_->sleepers.fetch_sub(1, std::memory_order_relaxed);
  if (!finished) {
    throw Error(ErrorCode::Timeout,
                "did not finish within the " + std::to_string(timeout->count()) +
                    " ms given to Work::wait (the op keeps running)",
                state_->context());
  }
  if (state_->error) std::rethrow_exception(state_->error);
}

}  // namespace cohort
