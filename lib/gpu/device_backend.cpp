#include "gpu/device_backend.hpp"
#include "gpu/device_guard.hpp"

#include "core/log.hpp"
#include "gpu/device_support.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

namespace cohort::gpu {
namespace {

using Clock = std::chrono::steady_clock;

/// How often the watchdog looks at ops nobody waits on: an unwaited op fails at most this long
/// after its deadline.
constexpr auto kWatchdogPeriod = std::chrono::milliseconds(100);
/// How long destruction gives NCCL to finalise cleanly before aborting the communicator.
constexpr auto kFinalizeGrace = std::chrono::seconds(10);

std::chrono::milliseconds left_until(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return std::max(left, std::chrono::milliseconds(1));
}

/// How long one store read waits for NCCL's unique id before looking at the stop flag again.
constexpr auto kUniqueIdPollSlice = std::chrono::milliseconds(100);

/// How long a wait that saw abort()'s stop flag waits for abort() to set its cause (it needs only
/// the mutex the waiter lets go of).
constexpr auto kStopCauseWait = std::chrono::seconds(10);

/// Polls NCCL's asynchronous state until the pending operation (init, split, finalise) ends.
/// Throws (the caller aborts) on an NCCL error, at the deadline, or once `stop` is set (the
/// backend failed or was aborted meanwhile).
void await_nccl(DeviceRuntime& rt, NcclHandle comm, Clock::time_point deadline,
                const std::string& what, const std::atomic<bool>* stop = nullptr) {
  for (int polls = 0;; ++polls) {
    const NcclAsyncState state = rt.nccl_async_state(comm);
    if (state.kind == NcclAsyncState::Idle) return;
    if (state.kind == NcclAsyncState::Failed)
      throw Error(state.remote ? ErrorCode::RemoteError : ErrorCode::SystemError,
                  what + " failed: " + state.message);
    if (stop && stop->load(std::memory_order_acquire))
      throw Error(ErrorCode::InvalidUsage, what + " stopped: the communicator failed meanwhile");
    if (Clock::now() >= deadline)
      throw Error(ErrorCode::Timeout, what +
                                          " did not finish before the op's deadline (a peer may "
                                          "not have reached the same op)");
    if (polls > 1000) std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

}  // namespace

DeviceBackend::DeviceBackend(std::shared_ptr<Store> store, std::string key_prefix, int rank,
                             int size)
    : store_(std::move(store)), key_prefix_(std::move(key_prefix)), rank_(rank), size_(size) {
  // Made now (not on the first GPU op) so abort() from another thread never races its creation.
  if (DeviceRuntime* rt = device_runtime()) core_ = std::make_shared<DeviceCore>(*rt);
}

DeviceBackend::DeviceBackend(std::shared_ptr<Store> store, std::string key_prefix, int rank,
                             int size, NcclChild child)
    : DeviceBackend(std::move(store), std::move(key_prefix), rank, size) {
  DeviceRuntime& rt = require_runtime("split");
  const int device = child.device();
  core_->comm = child.release();  // ours now: the destructor finalizes it
  core_->has_comm = true;
  core_->set_up = DeviceCore::SetUp::Ready;
  device_ = device;
  const DeviceGuard on_device(rt, device);
  barrier_word_ = rt.allocate_device(sizeof(std::int32_t), device);
}

DeviceBackend::~DeviceBackend() {
  {
    std::lock_guard lock(watchdog_mutex_);
    stop_ = true;
  }
  watchdog_wake_.notify_all();
  if (watchdog_.joinable()) watchdog_.join();
  if (!core_) return;
  {
    // Destroyed while another thread's op sets NCCL up (a misuse: that op still uses us): stop
    // it and wait until it has let go, each step bounded by its deadline.
    std::unique_lock lock(core_->mutex);
    if (core_->set_up == DeviceCore::SetUp::InProgress) {
      core_->fail_locked(Error(ErrorCode::InvalidUsage,
                               "the communicator was destroyed while its GPU set-up ran"));
      core_->set_up_changed.wait(lock,
                                 [this] { return core_->set_up != DeviceCore::SetUp::InProgress; });
    }
  }
  // Every outstanding op ends by its own deadline (a timeout aborts the NCCL communicator).
  for (const auto& op : outstanding_snapshot())
    for (int polls = 0; !op->poll(); ++polls)
      if (polls > 1000) std::this_thread::sleep_for(std::chrono::microseconds(100));
  DeviceRuntime& rt = core_->runtime;
  std::lock_guard lock(core_->mutex);
  if (core_->has_comm) {
    try {
      const DeviceGuard on_device(rt, *device_);
      rt.nccl_finalize(core_->comm);
      await_nccl(rt, core_->comm, Clock::now() + kFinalizeGrace, "NCCL finalize");
      rt.nccl_destroy(core_->comm);
    } catch (const std::exception& e) {
      COHORT_LOG_WARN("NCCL communicator did not finalise cleanly ({}); aborting it", e.what());
      rt.nccl_abort(core_->comm);
    }
    core_->has_comm = false;
  }
  for (EventHandle event : core_->spare_events) rt.destroy_event(event);
  core_->spare_events.clear();
  if (default_stream_done_.bits != 0) rt.destroy_event(default_stream_done_);
  if (own_stream_made_) rt.destroy_stream(own_stream_);
  if (barrier_word_ != nullptr) rt.free_device(barrier_word_);
}

std::optional<int> DeviceBackend::bound_device() const {
  if (!core_) return std::nullopt;
  std::lock_guard lock(core_->mutex);
  return device_ ? device_ : claimed_device_;
}

namespace {

Error wrong_device(std::string_view op, int device, int bound) {
  return Error(ErrorCode::InvalidArgument,
               fmt::format("{}: the buffers are on cuda:{}, but this communicator's GPU ops run "
                           "on cuda:{} (its first GPU op used it); a communicator drives one "
                           "device per rank: for another device use a communicator dup()ed from "
                           "this one before its first GPU op (a split or dup made since shares "
                           "its device, through ncclCommSplit)",
                           op, device, bound));
}

}  // namespace

DeviceBackend::Prepared DeviceBackend::prepare(std::string_view op, int device,
                                               std::optional<DType> dtype,
                                               std::optional<ReduceOp> reduce_op) {
  DeviceRuntime& rt = require_runtime(op);
  // The backend's state is made with the communicator, from the runtime in use then: a runtime
  // installed later (tests only) must not reach launch() without it.
  if (!core_)
    throw Error(ErrorCode::InvalidUsage,
                fmt::format("{}: this communicator was created before a device runtime was "
                            "installed; create it after install_device_runtime()",
                            op));
  const int devices = rt.device_count();
  if (devices == 0)
    throw Error(ErrorCode::Unsupported,
                fmt::format("{}: CUDA buffers need a GPU, but no CUDA device is visible to rank {} "
                            "(no driver, no device, or CUDA_VISIBLE_DEVICES hides them)",
                            op, rank_));
  const std::optional<int> bound = bound_device();
  const bool any_device = device == kAnyDevice;  // a barrier on a stream: no buffers
  if (any_device) device = bound ? *bound : rt.current_device();
  if (device < 0 || device >= devices)
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("{}: CUDA device {} does not exist (rank {} sees {})", op, device,
                            rank_, devices));
  if (bound && *bound != device) throw wrong_device(op, device, *bound);
  if (dtype) check_device_dtype(rt, op, *dtype);
  if (dtype && reduce_op) check_device_reduce_op(op, *reduce_op, *dtype);
  // Last, once nothing else can refuse the op: the first op that passes binds the device, before
  // it is numbered. Another thread's op on another device is then refused here too, before it is
  // numbered, not in launch() after waiting for this one's set-up (numbered by then, its refusal
  // would fail the communicator).
  std::lock_guard lock(core_->mutex);
  const std::optional<int> now_bound = device_ ? device_ : claimed_device_;
  if (any_device && now_bound) device = *now_bound;  // bound meanwhile by another thread's op
  if (now_bound && *now_bound != device) throw wrong_device(op, device, *now_bound);
  if (!now_bound) claimed_device_ = device;
  return {device};
}

void DeviceBackend::throw_if_failed_locked(const ErrorContext& context) const {
  if (core_->failure)
    throw Error(
        ErrorCode::InvalidUsage,
        fmt::format("the GPU path of this communicator failed earlier: {}", core_->failure->what()),
        context);
}

void DeviceBackend::await_set_up_locked(std::unique_lock<std::mutex>& lock,
                                        Clock::time_point deadline, const ErrorContext& context,
                                        std::string_view whose_deadline) {
  if (core_->set_up_changed.wait_until(lock, deadline, [this] {
        return core_->set_up != DeviceCore::SetUp::InProgress || core_->failure.has_value();
      }))
    return;
  // Past the deadline: the GPU path fails, as after every GPU timeout (the set-up stops too),
  // unless it failed meanwhile or abort() is failing it this moment (that cause stays).
  await_stop_cause_locked(lock);
  throw_if_failed_locked(context);
  const Error timeout(ErrorCode::Timeout,
                      fmt::format("another thread's op was still setting up the NCCL communicator "
                                  "at {} deadline",
                                  whose_deadline),
                      context);
  core_->fail_locked(timeout);
  throw timeout;
}

void DeviceBackend::ensure_set_up(std::unique_lock<std::mutex>& lock, int device,
                                  Clock::time_point deadline, const ErrorContext& context) {
  using SetUp = DeviceCore::SetUp;
  if (core_->set_up == SetUp::InProgress) {
    // Another thread's op is creating it: this op waits for that, within its own deadline.
    await_set_up_locked(lock, deadline, context, "this op's");
    throw_if_failed_locked(context);
  }
  if (core_->set_up == SetUp::Ready) return;

  // This thread creates it, without the mutex: the creation waits on the other ranks, and
  // abort(), the watchdog and other threads' ops must not wait behind it.
  core_->set_up = SetUp::InProgress;
  lock.unlock();
  std::optional<CreatedComm> created;
  std::optional<Error> error;
  try {
    created = create_nccl(device, deadline, context);
  } catch (const Error& e) {
    error = e.with_context(context);
  } catch (const std::exception& e) {
    // Whatever escapes, the state must leave InProgress, or every later op waits it out.
    error = Error(ErrorCode::Internal,
                  fmt::format("setting up the NCCL communicator failed: {}", e.what()), context);
  } catch (...) {
    error = Error(ErrorCode::Internal,
                  "setting up the NCCL communicator failed (unknown exception)", context);
  }
  lock.lock();
  await_stop_cause_locked(lock);
  const bool failed_meanwhile = core_->failure.has_value();
  if (created && !failed_meanwhile) {
    barrier_word_ = created->barrier_word;
    core_->comm = created->comm;
    core_->has_comm = true;
    core_->set_up = SetUp::Ready;
    device_ = device;
  } else {
    core_->set_up = SetUp::None;
    if (created) {
      core_->runtime.nccl_abort(created->comm);
      core_->runtime.free_device(created->barrier_word);
    }
    // A failed set-up is final, as any GPU failure: trying again, rank 0 would publish a
    // second unique id while the other ranks may still hold the first.
    if (error && !failed_meanwhile) core_->fail_locked(*error);
  }
  core_->set_up_changed.notify_all();
  if (failed_meanwhile) throw_if_failed_locked(context);  // abort()'s cause, not our give-up
  if (error) throw *error;
}

Bytes DeviceBackend::await_unique_id(const std::string& key, Clock::time_point deadline,
                                     const ErrorContext& context) {
  // In slices, so an abort() meanwhile is seen within one.
  for (;;) {
    if (core_->stopping.load(std::memory_order_acquire))
      throw Error(ErrorCode::InvalidUsage,
                  "setting up the NCCL communicator stopped: the communicator failed meanwhile",
                  context);
    try {
      return store_->get(key, std::min(left_until(deadline), kUniqueIdPollSlice));
    } catch (const Error& e) {
      if (e.code() == ErrorCode::Timeout && Clock::now() < deadline) continue;
      const std::string why =
          e.code() == ErrorCode::Timeout ? "it was not there by the op's deadline" : e.what();
      throw Error(e.code(),
                  fmt::format("setting up the NCCL communicator (this communicator's first GPU "
                              "op): rank 0 did not publish NCCL's unique id in time (is it running "
                              "the same op on CUDA buffers?): {}",
                              why),
                  context);
    }
  }
}

DeviceBackend::CreatedComm DeviceBackend::create_nccl(int device, Clock::time_point deadline,
                                                      const ErrorContext& context) {
  DeviceRuntime& rt = core_->runtime;  // `device` is current (the caller's DeviceGuard)
  const std::string key = key_prefix_ + "/nccl_unique_id";
  NcclUniqueId id{};
  if (rank_ == 0) {
    id = rt.nccl_unique_id();
    Bytes bytes(id.size());
    std::memcpy(bytes.data(), id.data(), id.size());
    store_->set(key, bytes);
  } else {
    const Bytes bytes = await_unique_id(key, deadline, context);
    if (bytes.size() != id.size())
      throw Error(ErrorCode::Internal,
                  fmt::format("store key '{}' holds {} bytes, not an NCCL unique id ({} bytes)",
                              key, bytes.size(), id.size()),
                  context);
    std::memcpy(id.data(), bytes.data(), id.size());
  }
  // Only this thread touches `comm` until it is published (NCCL calls on one communicator must
  // not overlap): a stop is seen by the polling below, which aborts it here.
  const NcclHandle comm = rt.nccl_init(size_, id, rank_);
  try {
    await_nccl(rt, comm, deadline, "setting up the NCCL communicator", &core_->stopping);
  } catch (const Error& e) {
    rt.nccl_abort(comm);
    throw e.with_context(context);
  }
  if (rank_ == 0) {
    // Set-up ends only once every rank joined with the id, so nobody reads the key any more.
    try {
      store_->erase(key);
    } catch (const Error& e) {
      COHORT_LOG_WARN("could not erase the store key '{}': {}", key, e.what());
    }
  }
  void* barrier_word = nullptr;
  try {
    barrier_word = rt.allocate_device(sizeof(std::int32_t), device);
  } catch (...) {
    rt.nccl_abort(comm);
    throw;
  }
  COHORT_LOG_DEBUG("{}: NCCL communicator of rank {}/{} on cuda:{} ready ({})", key_prefix_, rank_,
                   size_, device, rt.describe());
  return {comm, barrier_word};
}

std::shared_ptr<DeviceCompletion> DeviceBackend::launch(
    const Prepared& prepared, std::optional<std::uintptr_t> stream,
    std::chrono::milliseconds timeout, ErrorContext context,
    const std::function<void(const Launch&)>& body, DeviceCompletion::OnFinish on_finish,
    std::vector<std::shared_ptr<void>> keepalive) {
  if (!core_)  // prepare() refuses this first; kept so a misuse is an error, never a null access
    throw Error(ErrorCode::InvalidUsage, "GPU op launched without a device runtime", context);
  DeviceRuntime& rt = core_->runtime;
  const Clock::time_point deadline = Clock::now() + timeout;
  std::shared_ptr<DeviceCompletion> completion;
  {
    std::unique_lock lock(core_->mutex);
    // abort() may have set its stop flag and be waiting for this mutex (a split let go of it to
    // let abort() in): no NCCL call on a communicator that is being aborted.
    await_stop_cause_locked(lock);
    throw_if_failed_locked(context);
    const DeviceGuard on_device(rt, device_ ? *device_ : prepared.device);
    if (!core_->has_comm) ensure_set_up(lock, prepared.device, deadline, context);
    // prepare() bound the device before the op was numbered, and every op since agreed with it.
    if (*device_ != prepared.device)
      throw Error(ErrorCode::Internal,
                  fmt::format("prepared for cuda:{}, but the communicator is bound to cuda:{}",
                              prepared.device, *device_),
                  context);
    StreamHandle on{};
    if (stream) {
      on = StreamHandle{*stream};
    } else {
      if (!own_stream_made_) {
        own_stream_ = rt.create_stream();
        own_stream_made_ = true;
        default_stream_done_ = rt.create_event();
      }
      // After whatever the application queued on the legacy default stream (the usual home of
      // the kernels that produced the input), without blocking the host.
      rt.record_event(default_stream_done_, StreamHandle{0});
      rt.stream_wait_event(own_stream_, default_stream_done_);
      on = own_stream_;
    }
    // Made before anything is queued: failing to make it leaves nothing behind.
    const EventHandle event = core_->take_event_locked();
    try {
      body(Launch{rt, core_->comm, on, rank_, size_, barrier_word_});
      // A nonblocking communicator may still be queueing the op when the call returns: the event
      // must be recorded after the kernels, and the next NCCL call may only come after it.
      await_nccl(rt, core_->comm, deadline, "queueing the op on NCCL", &core_->stopping);
      rt.record_event(event, on);
    } catch (const Error& e) {
      // Kernels may be queued that nothing tracks: failing the communicator aborts NCCL, which
      // ends them before the buffers' owners go.
      core_->spare_events.push_back(event);
      await_stop_cause_locked(lock);
      throw_if_failed_locked(context);  // stopped by abort(): its cause
      const Error failure = e.with_context(context);
      core_->fail_locked(failure);
      throw failure;
    }
    completion =
        std::make_shared<DeviceCompletion>(core_, event, deadline, timeout, std::move(context),
                                           std::move(on_finish), std::move(keepalive));
    core_->outstanding.push_back(completion);
  }
  std::lock_guard lock(watchdog_mutex_);
  if (!watchdog_.joinable()) watchdog_ = std::thread([this] { watchdog_main(); });
  return completion;
}

void DeviceBackend::await_stop_cause_locked(std::unique_lock<std::mutex>& lock) {
  if (core_->failure || !core_->stopping.load(std::memory_order_acquire)) return;
  // abort() sets the flag, then takes the mutex to set its cause: the cause is on its way.
  core_->set_up_changed.wait_for(lock, kStopCauseWait,
                                 [this] { return core_->failure.has_value(); });
}

NcclChild::~NcclChild() {
  if (comm_.bits == 0) return;
  try {
    const DeviceGuard on_device(*runtime_, device_);
    runtime_->nccl_abort(comm_);
  } catch (const std::exception& e) {
    COHORT_LOG_WARN("aborting an unused NCCL communicator split off on cuda:{}: {}", device_,
                    e.what());
    runtime_->nccl_abort(comm_);
  }
}

std::optional<NcclChild> DeviceBackend::split_nccl(int color, int key, Clock::time_point deadline) {
  if (!core_) return std::nullopt;
  const ErrorContext context{.op = "split"};
  std::unique_lock lock(core_->mutex);
  await_stop_cause_locked(lock);  // an abort() on its way: no split of a parent it aborts
  // Every rank splits or none: a set-up still running on another thread decides which.
  await_set_up_locked(lock, deadline, context, "the split's");
  if (!core_->has_comm || core_->failure) return std::nullopt;
  DeviceRuntime& rt = core_->runtime;
  const DeviceGuard on_device(rt, *device_);
  // Aborted on any way out but the return (a timeout, a failure, abort()).
  NcclChild child(rt, rt.nccl_split(core_->comm, color < 0 ? -1 : color, key), *device_);
  try {
    // A rank outside every group gets no communicator; the parent's state then says when its
    // part of the split is over.
    await_nccl(rt, child.comm().bits != 0 ? child.comm() : core_->comm, deadline, "ncclCommSplit",
               &core_->stopping);
  } catch (const Error& e) {
    if (child.comm().bits != 0) rt.nccl_abort(child.release());
    // Stopped by abort() (or a failure): the split fails with its cause, not "stopped".
    await_stop_cause_locked(lock);
    throw_if_failed_locked(context);
    // Past its deadline or failed in NCCL: the parent is left mid-split, so the GPU path fails,
    // as after any GPU timeout or NCCL error.
    const Error failure = e.with_context(context);
    core_->fail_locked(failure);
    throw failure;
  }
  return child;
}

void DeviceBackend::abort(const Error& cause) noexcept {
  if (!core_) return;
  // First, without the mutex: a split holding it while it waits for its peers gives up now
  // instead of at its deadline, and lets go of the mutex for the cause to be set.
  core_->stopping.store(true, std::memory_order_release);
  core_->fail(cause);
  for (const auto& op : outstanding_snapshot()) op->poll();
}

std::vector<std::shared_ptr<DeviceCompletion>> DeviceBackend::outstanding_snapshot() {
  std::lock_guard lock(core_->mutex);
  auto& ops = core_->outstanding;
  ops.erase(std::remove_if(ops.begin(), ops.end(), [](const auto& op) { return op->finished(); }),
            ops.end());
  return ops;
}

void DeviceBackend::watchdog_main() noexcept {
  std::unique_lock lock(watchdog_mutex_);
  while (!stop_) {
    watchdog_wake_.wait_for(lock, kWatchdogPeriod, [this] { return stop_; });
    if (stop_) break;
    lock.unlock();
    try {
      for (const auto& op : outstanding_snapshot()) op->poll();
    } catch (const std::exception& e) {
      COHORT_LOG_WARN("GPU watchdog: {}", e.what());
    }
    lock.lock();
  }
}

}  // namespace cohort::gpu
