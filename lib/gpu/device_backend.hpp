#pragma once

// DeviceBackend: a Communicator's GPU path. One per communicator, created with it but doing
// nothing until the first op on device buffers; then, collectively, it creates the NCCL
// communicator for that op's device (rank 0 publishes NCCL's unique id in the store under
// "cohort/comm/<id>/nccl_unique_id" and erases it once every rank joined), and from then on
// queues each op on a stream and hands back a DeviceCompletion for its Work.
//
// Streams: an op given a stream is queued on it; otherwise on the backend's own stream, made
// to wait (on the device) for the work queued on the legacy default stream. Each op records an
// event after it; completion is that event, polled.
//
// Failures: a completion that finds its deadline passed or NCCL's asynchronous error set fails
// the backend: the NCCL communicator is aborted (which ends its kernels, so no stream stays
// blocked on it), and every outstanding op fails. A watchdog thread (started with the NCCL
// communicator) polls outstanding ops every 100 ms, so an op nobody waits on still fails at its
// deadline. Each op's end is reported through its OnFinish, which poisons the communicator.
//
// Threading: launch() is called in op order from the communicator's callers; the backend's
// mutex serialises NCCL calls against the watchdog's abort. The first op creates the NCCL
// communicator without holding the mutex (it waits on the peers, up to the op's timeout): ops of
// other threads wait for it within their own deadlines, and abort() stops it within a poll.
// Destruction stops the watchdog, waits for outstanding ops (each bounded by its deadline) and
// finalises the NCCL communicator (aborting it if that does not finish within 10 s).

#include <cohort/error.hpp>
#include <cohort/store.hpp>

#include "algorithms/args.hpp"
#include "gpu/device_completion.hpp"
#include "gpu/device_runtime.hpp"

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

namespace cohort::gpu {

/// A point-to-point op on device buffers.
struct DeviceSendRecv {
  bool is_send;
  void* data;
  std::size_t count;
  DType dtype;
  int peer;
};

/// sendrecv on device buffers: both halves in one NCCL group (a ring of ungrouped receives,
/// each queued before its rank's send, would wait for each other).
struct DeviceExchange {
  DeviceSendRecv send;
  DeviceSendRecv recv;
};

/// Where one op is queued: the NCCL communicator, the stream and this rank's place.
struct Launch {
  DeviceRuntime& runtime;
  NcclHandle comm;
  StreamHandle stream;
  int rank;
  int size;
  void* barrier_word;  ///< one int32 of device memory for barrier's allreduce
};

// What each op queues (device_collectives.cpp): NCCL's own collective where NCCL has it, grouped
// send/receive for the v-forms, gather, scatter and alltoall.
void enqueue(const Launch& l, const algorithms::AllreduceArgs& a);
void enqueue(const Launch& l, const algorithms::BroadcastArgs& a);
void enqueue(const Launch& l, const algorithms::ReduceArgs& a);
void enqueue(const Launch& l, const algorithms::AllgatherArgs& a);
void enqueue(const Launch& l, const algorithms::GatherArgs& a);
void enqueue(const Launch& l, const algorithms::ScatterArgs& a);
void enqueue(const Launch& l, const algorithms::ReduceScatterArgs& a);
void enqueue(const Launch& l, const algorithms::AlltoallArgs& a);
void enqueue(const Launch& l, const algorithms::BarrierArgs& a);
void enqueue(const Launch& l, const DeviceSendRecv& a);
void enqueue(const Launch& l, const DeviceExchange& a);

/// A child NCCL communicator made by DeviceBackend::split_nccl(), owned until the child
/// communicator's DeviceBackend takes it. Dropped before that (the split failed after NCCL's
/// part: no tag id left for the new communicator, its transport failing), it is aborted, which
/// never waits for peers: each member drops its own. A rank outside every group holds none.
class NcclChild {
 public:
  NcclChild(DeviceRuntime& runtime, NcclHandle comm, int device) noexcept
      : runtime_(&runtime), comm_(comm), device_(device) {}
  NcclChild(NcclChild&& other) noexcept
      : runtime_(other.runtime_), comm_(std::exchange(other.comm_, {})), device_(other.device_) {}
  NcclChild& operator=(NcclChild&&) = delete;
  ~NcclChild();

  NcclHandle comm() const noexcept { return comm_; }
  int device() const noexcept { return device_; }
  /// Hands the communicator over: it is the caller's to finalize or abort from now on.
  NcclHandle release() noexcept { return std::exchange(comm_, {}); }

 private:
  DeviceRuntime* runtime_;
  NcclHandle comm_;
  int device_;
};

class DeviceBackend {
 public:
  /// Resolved on the caller's thread, before the op is numbered.
  struct Prepared {
    int device;
  };

  /// `key_prefix` is "cohort/comm/<id>"; `context` names the communicator in errors.
  DeviceBackend(std::shared_ptr<Store> store, std::string key_prefix, int rank, int size);
  /// A communicator split from one whose NCCL communicator existed: `child` came from
  /// split_nccl() on the parent and is already usable on its device; this backend owns it.
  DeviceBackend(std::shared_ptr<Store> store, std::string key_prefix, int rank, int size,
                NcclChild child);
  ~DeviceBackend();
  DeviceBackend(const DeviceBackend&) = delete;
  DeviceBackend& operator=(const DeviceBackend&) = delete;

  /// Checks what this rank alone can check: a runtime exists, `device` (kAnyDevice: the bound
  /// one, else the current one) matches the device the NCCL communicator is bound to (or will
  /// be), the dtype and reduce op are NCCL's. Throws InvalidArgument / Unsupported naming `op`.
  /// The first op it lets through binds the communicator to its device (ops on another device
  /// are refused from then on, before they are numbered).
  static constexpr int kAnyDevice = -2;
  Prepared prepare(std::string_view op, int device, std::optional<DType> dtype,
                   std::optional<ReduceOp> reduce_op);

  /// Queues one op: sets the NCCL communicator up on first use, or waits for another thread's
  /// op doing so (bounded by the op's `timeout`, which starts now; a Timeout fails the GPU path,
  /// as does a failed set-up), queues
  /// `body` on the stream, records the completion event. `context` names the op in errors;
  /// `on_finish` is called exactly once when it finished (from any thread), unless launch()
  /// throws (then the caller reports the failure). `keepalive` is released when it finished.
  std::shared_ptr<DeviceCompletion> launch(const Prepared& prepared,
                                           std::optional<std::uintptr_t> stream,
                                           std::chrono::milliseconds timeout, ErrorContext context,
                                           const std::function<void(const Launch&)>& body,
                                           DeviceCompletion::OnFinish on_finish,
                                           std::vector<std::shared_ptr<void>> keepalive);

  /// Collective over this communicator's ranks when it has an NCCL communicator (every rank
  /// has one or none: they are created together): ncclCommSplit by `color` (negative: this rank
  /// joins none and gets a null handle) and `key`. Returns nothing when there is no NCCL
  /// communicator to split (the child then sets up its own on its first GPU op). Waits, until
  /// `deadline`, for a set-up another thread's op is running (Timeout after it, which fails the
  /// GPU path). Holds the backend's mutex while NCCL splits (NCCL calls on the parent are
  /// serialised), but abort() stops it within a poll: the split then fails with abort()'s cause.
  std::optional<NcclChild> split_nccl(int color, int key,
                                      std::chrono::steady_clock::time_point deadline);

  /// Communicator::abort(): aborts the NCCL communicator and fails every outstanding op with
  /// `cause`; a set-up or split waiting on its peers stops. Any thread; never throws.
  void abort(const Error& cause) noexcept;

  /// The device the NCCL communicator is bound to: the first GPU op's that prepare() let through
  /// (before the NCCL communicator exists, too).
  std::optional<int> bound_device() const;

 private:
  struct CreatedComm {
    NcclHandle comm;
    void* barrier_word;
  };
  /// Throws InvalidUsage naming the earlier failure, if any (core_->mutex held).
  void throw_if_failed_locked(const ErrorContext& context) const;
  /// Makes sure the NCCL communicator exists: waits for another thread creating it, or creates
  /// it with `lock` (on core_->mutex) released meanwhile. A failure fails the backend.
  void ensure_set_up(std::unique_lock<std::mutex>& lock, int device,
                     std::chrono::steady_clock::time_point deadline, const ErrorContext& context);
  /// The collective creation itself (no lock held; stops when core_->stopping is set).
  CreatedComm create_nccl(int device, std::chrono::steady_clock::time_point deadline,
                          const ErrorContext& context);
  /// Rank 0's NCCL unique id from the store, read in slices so a stop is seen within one.
  Bytes await_unique_id(const std::string& key, std::chrono::steady_clock::time_point deadline,
                        const ErrorContext& context);
  void watchdog_main() noexcept;
  /// The outstanding completions, pruned of finished ones.
  std::vector<std::shared_ptr<DeviceCompletion>> outstanding_snapshot();

  std::shared_ptr<Store> store_;
  const std::string key_prefix_;
  const int rank_;
  const int size_;
  std::shared_ptr<DeviceCore> core_;
  /// Set on first use (or by the split constructor); guarded by core_->mutex.
  std::optional<int> device_;
  /// The device the first op prepare() let through bound the communicator to, before its NCCL
  /// communicator exists (device_ is set with it); guarded by core_->mutex.
  std::optional<int> claimed_device_;
  /// Waits, letting go of the mutex, until no other thread's set-up is in progress or the backend
  /// failed. At `deadline` it fails the GPU path with Timeout naming `whose_deadline` ("this
  /// op's"), or throws the failure that came meanwhile.
  void await_set_up_locked(std::unique_lock<std::mutex>& lock,
                           std::chrono::steady_clock::time_point deadline,
                           const ErrorContext& context, std::string_view whose_deadline);
  /// After a wait that saw core_->stopping before core_->failure (abort() sets the flag first,
  /// then the cause under the mutex): waits (briefly, releasing the mutex) for that cause.
  void await_stop_cause_locked(std::unique_lock<std::mutex>& lock);
  StreamHandle own_stream_{};
  bool own_stream_made_ = false;
  EventHandle default_stream_done_{};
  void* barrier_word_ = nullptr;

  std::mutex watchdog_mutex_;
  std::condition_variable watchdog_wake_;
  bool stop_ = false;
  std::thread watchdog_;
};

}  // namespace cohort::gpu
