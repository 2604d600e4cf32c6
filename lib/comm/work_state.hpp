#pragma once

// The shared state behind a Work handle: filled in once by whichever thread ran the op.

#include <cohort/algorithm.hpp>
#include <cohort/error.hpp>

#include "core/fork_generation.hpp"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <variant>

namespace cohort::detail {

/// Lets a thread waiting on a Work drive its communicator's progress itself instead of waiting
/// for the progress thread to notice a completion and wake it: each of those handoffs costs
/// 25-35 us here. The executor clears `help` (under `mutex`) before it goes away.
struct ProgressHook {
  /// Held by a Work::wait for its whole polling phase (at most transport::kYieldPhase), so the
  /// executor's destructor may wait that long for it.
  std::mutex mutex;
  void (*help)(void* context) noexcept = nullptr;  ///< runs one drive step if nobody is driving
  void* context = nullptr;
  /// How long a wait polls before it starts yielding the core between polls: the transport's
  /// spin budget when every rank of the host has a core, else 0. A yield is a system call that
  /// costs more than a small message takes to arrive from a peer on another core. Set before
  /// the first op, read-only after.
  std::chrono::microseconds spin{0};
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

/// A collective's identity, turned into a name only when a message needs it (an error, a
/// timeout): formatting "allreduce #17" for every async op cost a string each.
struct CollectiveLabel {
  Collective kind = Collective::Barrier;
  std::uint32_t seq = 0;
  Algorithm forced = Algorithm::Auto;  ///< the algorithm the caller forced (Auto: none)
  std::uint32_t communicator = 0;      ///< the id of the communicator that runs it
};

/// A send or receive, named only when a message needs the name: formatting
/// "send #3 to rank 1 (tag 7)" for every op cost about a tenth of a small send/recv's time.
struct PointToPointLabel {
  bool is_send = false;
  std::uint32_t seq = 0;
  int peer = 0;
  int user_tag = 0;
  std::uint32_t communicator = 0;  ///< the id of the communicator that runs it
};

/// The op as an ErrorContext: op, sequence, communicator and the rest the label knows.
ErrorContext context_of(const CollectiveLabel& label);
ErrorContext context_of(const PointToPointLabel& label);

struct WorkState {
  explicit WorkState(const CollectiveLabel& op) : label_(op) {}
  explicit WorkState(const PointToPointLabel& p2p) : label_(p2p) {}
  /// An op named by a whole context (a device op, and a GPU sendrecv is neither label). Held
  /// by pointer: inline, it made every Work's state, host ones included, about 110 bytes
  /// larger; a device op allocates anyway.
  explicit WorkState(std::shared_ptr<const ErrorContext> op) : label_(std::move(op)) {}

  /// Marks the op finished, with `failure` null on success, and wakes every waiter. Called once.
  void complete(std::exception_ptr failure) noexcept;

  /// Names another send/receive: only while no Work holds this state yet (an executor keeps one
  /// such spare state for the next transfer; see Executor::submit_p2p).
  void relabel(const PointToPointLabel& p2p) noexcept { label_ = p2p; }

  /// The op, as an error's context: op, sequence and, for a send or receive, its counterpart
  /// and tag.
  ErrorContext context() const {
    if (const auto* whole = std::get_if<std::shared_ptr<const ErrorContext>>(&label_))
      return **whole;
    if (const auto* p2p = std::get_if<PointToPointLabel>(&label_)) return context_of(*p2p);
    return context_of(std::get<CollectiveLabel>(label_));
  }
  /// "allreduce #17", "recv #4 from rank 0 (tag 7)": for messages that name no Error.
  std::string what() const { return format_context(context()); }
  std::mutex mutex;
  std::condition_variable finished_cv;
  /// Set once the op finished (release, after `error`); read without the mutex.
  std::atomic<bool> finished{false};
  /// Threads asleep on finished_cv, or about to be: complete() takes the mutex and notifies
  /// only when there are any, so finishing an op nobody sleeps on takes no lock. It and
  /// `finished` are sequentially consistent, so either complete() sees a sleeper or the sleeper
  /// sees `finished` before it sleeps.
  std::atomic<int> sleepers{0};
  /// Written once, before `finished` is set (a device op's pollers write it under the mutex);
  /// read by whoever has seen `finished`.
  std::exception_ptr error;
  /// The executor that runs the op, for Work::wait to help along; empty once it is gone.
  std::weak_ptr<ProgressHook> hook;
  /// Set for an op on device buffers (then hook is empty): polled for completion.
  std::shared_ptr<DeviceSync> device;
  /// The fork of the program that made it (fork_generation()): in a child forked since, nothing
  /// will ever finish it.
  const std::uint32_t fork_generation = cohort::fork_generation();

 private:
  /// Set before any Work holds it.
  std::variant<CollectiveLabel, PointToPointLabel, std::shared_ptr<const ErrorContext>> label_;
};

/// One state, finished with success, that every send done at post shares (a small message
/// written into a peer's fastbox): such a send needs no state of its own, and allocating,
/// labelling and freeing one was about a tenth of a small send/recv's time. A static that the
/// pointer does not own, so Works holding it count no references; it lives as long as the
/// process.
const std::shared_ptr<WorkState>& finished_work() noexcept;

}  // namespace cohort::detail
