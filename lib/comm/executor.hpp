#pragma once

// Executor: runs one communicator's ops one at a time, in call order, and owns the right to
// drive its transport (which is not thread-safe: exactly one thread drives it at a time).
//
// Three paths:
// - Fast: an op that finds the executor open (nothing queued or running, not poisoned) claims
//   the drive without the mutex and runs on the caller's thread; its end is a plain store.
//   Blocking collectives, blocking and *_async sends/receives, and a waiter's poll of the
//   sends/receives in flight (help) all take it. This is the common case (calls from one
//   thread), and it matters beyond the few nanoseconds of a lock: a locked instruction right
//   after an op's last store into shared memory stalls until that store reaches the peer's
//   cache. With four lock/unlock pairs per op that stall was a quarter of a 4-byte broadcast on
//   two ranks (0.30-0.42 us against 0.25-0.31 without them, Open MPI 0.18-0.27), and the one
//   atomic exchange left after that still cost it 0.30-0.34 against 0.25-0.28 us without
//   (2026-11-29). So the claim comes in two kinds:
//   - Shared: a compare-exchange on fast_active_, then a look at fast_open_ (Dekker: both
//     sides seq_cst). Any thread.
//   - Biased: once one thread has run kBiasAfterOps fast ops in a row with nothing in flight,
//     the path is biased to it (only ever to that one thread: the bias thread), and its claims
//     are plain stores and loads of owner_state_, with no fence. The other side of the
//     handshake pays instead: whoever needs the drive, or numbers an op, from another thread
//     revokes the bias (revoke_bias_locked: a membarrier(2) that fences every thread of the
//     process, tens of microseconds in a VM), after which the bias thread's claims are shared
//     ones again until it has run its streak once more. The bias thread drops its own bias,
//     without any fence, when it queues work or leaves a send/receive in flight (it keeps it
//     when it numbers a device op). Each revocation by another thread doubles the streak
//     needed for the next bias, so threads that take turns end up on the shared claim rather
//     than paying for membarriers.
//   Either kind holds kClaimNumbering until the op has its number, and whoever closes the path
//   waits for that to pass before it numbers an op of its own: an op claimed first is numbered
//   first, so ops run in the order of their numbers (ranks pair their ops by number; running
//   number 8 before 7 would wait for a peer that waits in 7).
// - Inline: a blocking call that finds nothing queued or running but the fast path closed (the
//   progress thread is polling, or another thread runs a fast op) runs on the caller's thread
//   under the mutex's bookkeeping. A sleep/wake handoff to another thread costs tens of
//   microseconds, far more than a small collective, so the common blocking case never touches
//   the progress thread.
// - Queued: *_async collectives (and calls that find work ahead of them) go to a FIFO served
//   by a progress thread ("cohort-progress"), started on first use. The thread sleeps on a
//   condition variable when idle; it polls (once per millisecond) only while point-to-point
//   requests are in flight.
//
// Collectives are numbered in call order (the number is part of their message tags); sends and
// receives have their own numbering, since ranks make different point-to-point calls.
//
// Point-to-point ops are posted in order and then complete in the background, held and polled
// by InFlightTransfers (p2p_inflight.hpp): an async send does not hold up the ops queued behind
// it (as MPI_Isend + MPI_Recv would not deadlock). A blocking send still waits for its own
// completion, which may need the receive to be posted.
//
// Nor do sends and receives wait for the collectives ahead of them (MPI's progress rule): one
// called while an op drives (another thread's, or an *_async collective on the progress thread)
// is queued, and the driver posts it between the polling rounds of its waits (SideWork, asked
// for by the queueing thread), then polls the transfers in flight there until they end. So a
// receive called after an unfinished allreduce_async is posted at once, and a peer whose send
// must end before it joins that allreduce is not left waiting for it. A transfer that may touch
// the memory of an *_async collective before it (Footprint) waits for that collective, and the
// transfers after it with it. Collectives still run one at a time in call order, and
// sends/receives keep their order among themselves.
//
// Failures: a transport error (timeout, dead peer) or any unexpected exception fails the op and
// poisons the executor: the transport's requests are cancelled, queued and in-flight ops fail
// with Error(InvalidUsage) carrying the cause, and later calls fail fast the same way. A
// cross-rank argument mismatch found by the debug fingerprint fails the op without poisoning
// (every rank detected it after a complete exchange, so no message is left in flight).

#include <cohort/algorithm.hpp>
#include <cohort/error.hpp>
#include <cohort/work.hpp>

#include <cohort/algorithm.hpp>
#include "algorithms/op_context.hpp"
#include "algorithms/selection.hpp"
#include "comm/fingerprint.hpp"
#include "comm/flight_recorder.hpp"
#include "comm/p2p_inflight.hpp"
#include "comm/work_state.hpp"
#include "transport/side_work.hpp"
#include "transport/transport.hpp"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <pthread.h>

namespace cohort::comm {

using OpBody = std::function<void(const algorithms::OpContext&)>;

/// The host memory an *_async collective reads and writes, as passed (an over-estimate, such as
/// a non-root's unused input, only keeps a transfer in call order). A send or receive called
/// after it is posted ahead of it (SideWork) only when the two cannot touch the same bytes: the
/// send reads nothing the collective writes, the receive writes nothing it reads or writes.
struct Footprint {
  struct Range {
    std::uintptr_t begin = 0, end = 0;  ///< [begin, end); empty when equal
  };
  Range reads, writes;
  static Range of(const void* data, std::size_t bytes) noexcept {
    const auto begin = reinterpret_cast<std::uintptr_t>(data);
    return {begin, begin + bytes};
  }
  bool conflicts_with(const PointToPoint& p2p) const noexcept {
    const Range t = of(p2p.data, p2p.bytes);
    const auto overlap = [&t](const Range& r) { return t.begin < r.end && r.begin < t.end; };
    return overlap(writes) || (!p2p.is_send && overlap(reads));
  }
};

/// What the executor needs to know about an op besides its body.
struct OpInfo {
  Collective kind = Collective::Barrier;
  Algorithm forced = Algorithm::Auto;  ///< shown in error messages when set
  std::chrono::milliseconds timeout{0};
  /// Set under COHORT_DEBUG=detail. Behind a pointer: an optional in place made OpInfo 150-odd
  /// bytes that every op zeroed (a `rep stos` in profiles of tiny ops).
  std::shared_ptr<const Fingerprint> fingerprint;
  OpShape shape;        ///< for the flight record (collectives only)
  Footprint footprint;  ///< set for *_async collectives only
};

namespace testing {
/// While set, starting a communicator's progress thread fails as std::thread does when the
/// system is out of threads (std::system_error), which root cannot provoke with RLIMIT_NPROC.
void refuse_progress_threads(bool refuse) noexcept;
/// Executors made after this bias their fast path after `ops` fast ops in a row instead of
/// Executor::kBiasAfterOps (0 restores it), so a test reaches the biased path in a few ops.
void bias_after_ops(std::uint32_t ops) noexcept;
/// While set, a biased claim that has seen the bias hold calls it before it takes its number
/// (still kClaimNumbering), on the claiming thread: a test holds a claim there while another
/// thread revokes. Read with one relaxed load, only on the biased path.
extern std::atomic<void (*)()> biased_claim_hook;
}  // namespace testing

class Executor {
 public:
  /// Fast ops in a row, by one thread with nothing in flight, before the fast path is biased
  /// to it (see the file's comment). testing::bias_after_ops overrides it for executors made
  /// afterwards.
  /// A revocation from another thread costs a membarrier (25 us in a VM with the bias thread
  /// running) and a biased claim saves some 0.05 us per op, so the first bias waits for a
  /// streak about half as long as it takes to earn that back.
  static constexpr std::uint32_t kBiasAfterOps = 256;
  /// A fast-path claim's state (fast_active_ for shared claims, owner_state_ for biased ones).
  static constexpr std::uint8_t kClaimIdle = 0, kClaimNumbering = 1, kClaimRunning = 2;

  /// `arenas` (may be null) is handed to algorithms; it must outlive the executor. `tag_id` goes
  /// into every message tag; `comm_id` names the communicator in messages; `job_id` (may be
  /// empty) names its flight record's file.
  Executor(transport::Transport& transport, transport::LazyArena* arenas,
           algorithms::HostGroups* host_groups, int rank, int size, std::uint32_t comm_id,
           std::uint32_t tag_id, std::string job_id = {});
  /// Runs every queued op and waits for in-flight sends/receives (each bounded by its own
  /// deadline), then stops the progress thread. Never throws.
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  /// How long Work::wait on this executor's ops polls without yielding the core before it
  /// yields between polls (ProgressHook::spin); 0 (the default) yields from the start. Set once,
  /// before the first op.
  void set_wait_spin(std::chrono::microseconds spin) noexcept { hook_->spin = spin; }

  /// Runs `body` as the next op and returns when it finished, rethrowing its error. `body` is
  /// called with the op's context exactly once, on this thread when nothing is ahead of it.
  template <class F>
  void run(OpInfo info, F&& body);
  /// Queues `body` as the next op; the Work completes when it ran.
  Work submit(OpInfo info, OpBody body);
  /// After a failed op: the transport keeps `keep` and `also` (the owners of the op's buffers)
  /// until what the failure left in flight there can no longer touch them
  /// (Transport::retain_until_quiet). Null ones are skipped. Never throws.
  void retain_until_quiet(std::shared_ptr<void> keep, std::shared_ptr<void> also = {}) noexcept;
  /// A send or receive (`p2p.is_send`) on host memory, already validated, with its deadline
  /// `timeout` from posting: run to completion (rethrowing its error), or queued behind what is
  /// ahead and reported through the Work. They take no OpInfo: building and copying one was a
  /// tenth of a small send's cost, and only a queued transfer needs it.
  void run_p2p(std::chrono::milliseconds timeout, const PointToPoint& p2p);
  /// A receive and a send (MPI_Sendrecv), both validated (with their buffers' owners), posted
  /// together (the receive first) and run to completion in one transport wait, each with its
  /// deadline `timeout` from posting; as two transfers waited for here when something is ahead.
  /// Both have ended when it returns; throws the communicator's first cause on a failure.
  void run_sendrecv(std::chrono::milliseconds timeout, PointToPoint recv, PointToPoint send);
  Work submit_p2p(std::chrono::milliseconds timeout, PointToPoint p2p);

  /// For a collective that moves nothing on any rank (algorithms::moves_nothing), which the
  /// communicator skips: no number, no flight record, not ordered behind anything, since it has
  /// nothing to order. Throws the poisoned error as any op would on an unusable communicator;
  /// otherwise returns at once. Any thread.
  void check_usable(Collective kind) const {
    // Open implies not poisoned (every poisoning closes it, and only an unpoisoned end of a
    // drive reopens it): the one load a skipped op pays.
    if (fast_open_.load(std::memory_order_seq_cst)) return;
    check_usable_locked_path(kind);
  }
  /// An op the GPU backend runs on a stream (device buffers) rather than this executor: takes
  /// its number (with the collectives, or with the sends/receives for Send and Recv) and records
  /// it as started. Throws the poisoned error when the communicator is unusable. Device ops are
  /// not ordered behind queued host ops: they are queued on their stream at once, in call order.
  std::uint32_t begin_external(const OpInfo& info);
  /// Its end, from whichever thread saw it: recorded done, or failed. A failure poisons like any
  /// op's; `failure` already names the op (context_of).
  void end_external(const OpInfo& info, std::uint32_t seq, const Error* failure) noexcept;
  /// A collective's context: its name, sequence number, communicator and forced algorithm.
  ErrorContext context_of(const OpInfo& info, std::uint32_t seq) const;

  /// Communicator::abort(): poisons with "communicator <id> was aborted: <reason>" and makes
  /// every transport and arena wait throw, so the op running on another thread fails within a
  /// polling round and every queued, in-flight and later op fails with that cause. Any thread;
  /// never throws; the first abort (or failure) is the cause that stays.
  void abort(const std::string& reason) noexcept;
  /// The cause of the poisoning, if any (a failure or abort()).
  std::optional<Error> error() const;

  /// This communicator's flight record (flight_recorder.hpp); dumps may come from any thread.
  FlightRecorder& recorder() noexcept { return recorder_; }
  /// Called from a running collective's body with the algorithm that ran, for its flight record
  /// (only the driving thread calls it, so it is a plain store).
  void note_algorithm(Algorithm ran) noexcept { ran_ = ran; }

  /// Whether the fast path is biased to a thread now, and how often it has been (tests,
  /// diagnostics). Any thread; a snapshot.
  bool biased() const noexcept { return bias_.load(std::memory_order_relaxed) == kBiased; }
  std::uint64_t bias_grants() const noexcept {
    return bias_grants_.load(std::memory_order_relaxed);
  }

 private:
  /// A non-owning callable reference, so the inline path never allocates a std::function.
  class BodyRef {
   public:
    template <class F>
    explicit BodyRef(F& f) noexcept
        : object_(&f),
          call_([](void* o, const algorithms::OpContext& c) { (*static_cast<F*>(o))(c); }) {}
    void operator()(const algorithms::OpContext& ctx) const { call_(object_, ctx); }

   private:
    void* object_;
    void (*call_)(void*, const algorithms::OpContext&);
  };

  struct QueuedOp {
    OpInfo info;
    std::uint32_t seq = 0;
    OpBody body;
    std::optional<PointToPoint> p2p;
    std::shared_ptr<detail::WorkState> work;
    FlightRecorder::TimePoint queued_at{};  ///< for the flight record (collectives)
  };

  /// How a fast-path op holds the drive (see the file's comment).
  enum class Claim : std::uint8_t { None, Shared, Biased };

  /// A fast-path op's claim of the drive, tried at construction and, when it holds, ended on
  /// every path out (end_fast_drive): no lock unless the op left the first transfer in flight
  /// while the progress thread sleeps. Right after it holds, the op takes its number (number())
  /// or says it takes none (unnumbered()).
  class FastClaim {
   public:
    explicit FastClaim(Executor& e) noexcept : executor_(e), claim_(e.try_claim_fast()) {}
    ~FastClaim() {
      if (claim_ != Claim::None) executor_.end_fast_drive(claim_);
    }
    FastClaim(const FastClaim&) = delete;
    FastClaim& operator=(const FastClaim&) = delete;
    explicit operator bool() const noexcept { return claim_ != Claim::None; }
    std::uint32_t number(std::atomic<std::uint32_t>& counter, std::uint32_t n = 1) noexcept {
      return executor_.take_numbers(claim_, counter, n);
    }
    void unnumbered() noexcept { executor_.take_no_number(claim_); }

   private:
    Executor& executor_;
    const Claim claim_;
  };

  /// Ends a drive (inline op or progress-thread step) on every path out.
  class DriveGuard {
   public:
    explicit DriveGuard(Executor& e) noexcept : executor_(e) {}
    ~DriveGuard() { executor_.end_drive(); }
    DriveGuard(const DriveGuard&) = delete;
    DriveGuard& operator=(const DriveGuard&) = delete;

   private:
    Executor& executor_;
  };

  void throw_if_poisoned_locked(Collective kind) const;
  void check_usable_locked_path(Collective kind) const;
  /// Claims the drive for a fast-path op (see the file's comment): Biased or Shared if this
  /// thread now holds it with the fast path open (a FastClaim ends it), None if it must take
  /// the locked path.
  Claim try_claim_fast() noexcept {
    if (bias_.load(std::memory_order_relaxed) == kBiased &&
        ::pthread_equal(bias_thread_.load(std::memory_order_relaxed), ::pthread_self())) {
      owner_state_.store(kClaimNumbering, std::memory_order_relaxed);
      // No fence: a revoker fences this thread (membarrier) between leaving kBiased and
      // reading owner_state_, so either this load sees the revocation or the revoker sees
      // kClaimNumbering. The compiler must still keep the store before the loads.
      std::atomic_signal_fence(std::memory_order_seq_cst);
      if (bias_.load(std::memory_order_relaxed) == kBiased &&
          fast_open_.load(std::memory_order_relaxed)) {
        if (void (*hook)() = testing::biased_claim_hook.load(std::memory_order_relaxed))
            [[unlikely]]
          hook();
        return Claim::Biased;
      }
      owner_state_.store(kClaimIdle, std::memory_order_release);
      return Claim::None;
    }
    std::uint8_t idle = kClaimIdle;
    if (!fast_active_.compare_exchange_strong(idle, kClaimNumbering, std::memory_order_seq_cst))
      return Claim::None;
    // Not while the path is biased, or a revocation is under way (biased claims do not look at
    // fast_active_), nor while the bias thread still runs an op it claimed before a revocation.
    // Reading kUnbiased (acquire) shows owner_state_ at least as the revoker (or the bias
    // thread dropping its bias) last saw it.
    if (fast_open_.load(std::memory_order_seq_cst) &&
        bias_.load(std::memory_order_seq_cst) == kUnbiased &&
        owner_state_.load(std::memory_order_seq_cst) == kClaimIdle)
      return Claim::Shared;
    fast_active_.store(kClaimIdle, std::memory_order_release);
    return Claim::None;
  }
  /// The first of `n` numbers from `counter` for an op just claimed. On the biased path a plain
  /// load and store (nobody else numbers while the bias holds: a revoker waits for the claim to
  /// leave kClaimNumbering, which happens here), else fetch_add.
  std::uint32_t take_numbers(Claim claim, std::atomic<std::uint32_t>& counter,
                             std::uint32_t n) noexcept {
    if (claim != Claim::Biased) {
      const std::uint32_t first = counter.fetch_add(n, std::memory_order_relaxed);
      fast_active_.store(kClaimRunning, std::memory_order_release);
      return first;
    }
    const std::uint32_t first = counter.load(std::memory_order_relaxed);
    counter.store(first + n, std::memory_order_relaxed);
    owner_state_.store(kClaimRunning, std::memory_order_release);
    return first;
  }
  /// The same for a drive step that takes no number (help()).
  void take_no_number(Claim claim) noexcept {
    (claim == Claim::Biased ? owner_state_ : fast_active_)
        .store(kClaimRunning, std::memory_order_release);
  }
  /// Publishes in_flight_'s count (pending_count_), waking the progress thread if this drive
  /// left the first transfer in flight while it sleeps without a timeout, and releases the
  /// claim. A shared claim counts toward the bias (count_toward_bias). Never throws.
  void end_fast_drive(Claim claim) noexcept;
  /// A shared fast op of this thread ended with nothing in flight: one more of its streak, and
  /// at kBiasAfterOps (doubled by each revocation from another thread) the bias.
  void count_toward_bias() noexcept;
  /// Revokes the bias, if any (mutex_ held): no biased claim starts after this, and one in
  /// progress has left kClaimNumbering (owner_state_ then says whether it runs). Fences every
  /// thread (membarrier) unless the bias thread revokes its own. Called before the mutex's
  /// holder numbers an op or claims the drive.
  void revoke_bias_locked() noexcept;
  /// No fast-path op starts after this (mutex_ held), and one claimed before has its number;
  /// it may still be running, and drive_free_locked() says whether one is.
  void close_fast_path_locked() noexcept {
    fast_open_.store(false, std::memory_order_seq_cst);
    revoke_bias_locked();
    // A few instructions away, unless its thread was preempted there. The bias thread too: a
    // biased attempt that read kBiased before a revocation stores kClaimNumbering only after
    // it, then sees the revocation and backs off; meanwhile it would look like a driver.
    while (fast_active_.load(std::memory_order_seq_cst) == kClaimNumbering ||
           owner_state_.load(std::memory_order_acquire) == kClaimNumbering)
      std::this_thread::yield();
  }
  /// Nobody drives: neither busy_ nor a fast-path op of either kind (mutex_ held, fast path
  /// closed).
  bool drive_free_locked() const noexcept {
    return !busy_ && fast_active_.load(std::memory_order_seq_cst) == kClaimIdle &&
           owner_state_.load(std::memory_order_acquire) == kClaimIdle;
  }
  /// Queues an op (mutex_ held by `lock`), starting the progress thread first if need be; throws
  /// (with `lock` let go) if it cannot start, leaving nothing queued.
  std::shared_ptr<detail::WorkState> enqueue_locked(std::unique_lock<std::mutex>& lock, OpInfo info,
                                                    OpBody body, std::optional<PointToPoint> p2p);
  /// Starts the progress thread on first use (mutex_ held by `lock`). If the system refuses a
  /// thread, fails the communicator (fail_communicator, which lets go of `lock`) and throws
  /// Error(SystemError) naming `kind`'s op; nothing was numbered, queued or claimed then.
  void start_thread_or_fail(std::unique_lock<std::mutex>& lock, Collective kind);
  /// Poisons with `failure` (the first cause stays) as abort() does: through the driver if one
  /// runs, else from this thread, which then claims the drive. Lets go of `lock` (on mutex_),
  /// except when out of memory copying the cause with none set before (nothing happens then).
  void fail_communicator(std::unique_lock<std::mutex>& lock, const Error& failure) noexcept;
  void end_drive() noexcept;
  /// By the driver: poisons when abort() or a failed op left that to this drive
  /// (poison_unhandled_).
  void take_unhandled_poison() noexcept;
  /// A Work's state for an op, able to help this executor along.
  /// `label`: a collective's CollectiveLabel or a send/receive's PointToPointLabel.
  template <class Label>
  std::shared_ptr<detail::WorkState> new_work(Label label) const;
  detail::PointToPointLabel label_p2p(const PointToPoint& p2p, std::uint32_t seq) const;
  /// A send's or receive's error context (op "send" or "recv", its number, peer, tag, and this
  /// communicator).
  ErrorContext p2p_context(const PointToPoint& p2p, std::uint32_t seq) const;
  /// Runs a collective on the driving thread; `queued_at`: when it was queued (the epoch: it
  /// never waited in the queue).
  void execute(const OpInfo& info, std::uint32_t seq, BodyRef body,
               FlightRecorder::TimePoint queued_at = {});
  void execute_sendrecv_blocking(std::chrono::milliseconds timeout, std::uint32_t seq,
                                 const PointToPoint& recv, const PointToPoint& send);
  void execute_p2p_blocking(std::chrono::milliseconds timeout, std::uint32_t seq,
                            const PointToPoint& p2p);
  /// The OpInfo a queued send/receive carries.
  static OpInfo p2p_info(std::chrono::milliseconds timeout, const PointToPoint& p2p) {
    return OpInfo{
        p2p.is_send ? Collective::Send : Collective::Recv, Algorithm::Auto, timeout, {}, {}};
  }
  void execute_queued(QueuedOp& op) noexcept;
  /// The side work (side_work.hpp), on the driving thread between the rounds of a wait: posts
  /// the sends/receives queued meanwhile, polls those in flight (after a post, when a waiter
  /// asks, at every round of a shared-memory wait, which drives nothing, else every few rounds),
  /// and asks to be called again while any is in flight (a thread may sleep on one's Work).
  void serve_in_wait(transport::WaitKind wait) noexcept;
  /// Posts the queued sends/receives, oldest first, leaving the collectives queued, up to the
  /// first one that may touch the memory of a collective before it (Footprint), which waits
  /// for that collective with every transfer after it. True if it posted any.
  bool post_queued_transfers() noexcept;
  /// A transfer that failed inside another op's wait: poisoning there would cancel that op's
  /// requests under it, so, as abort() does for an op another thread drives, the cause is set
  /// and the waits interrupted; the op then fails and poisons (or end_drive() does, if it ended
  /// first).
  void fail_from_wait(const ErrorContext& op, const Error& error) noexcept;
  /// Makes every wait on this communicator's transport, arena and host groups throw
  /// Error(InvalidUsage) with `message`.
  void interrupt_waits(const std::string& message) noexcept;
  /// What an op that was running when `failure` poisoned the communicator fails with.
  static std::string interrupted_by(const Error& failure);
  /// Posts a send/receive into in_flight_ (or fails `work`, poisoning on a transport error).
  /// Finished: done at post, and `work` untouched (the caller finishes it or hands out
  /// detail::finished_work()); Held: `work` reports the outcome (a failure already).
  [[nodiscard]] InFlightTransfers::Posted post_transfer(
      PointToPoint&& p2p, std::chrono::milliseconds timeout,
      const std::shared_ptr<detail::WorkState>& work) noexcept;
  /// Polls the in-flight sends/receives once; a failed one poisons. True if any finished.
  bool poll_pending() noexcept;
  /// Poisons with `error` carrying the op's context, and throws it. For sends and receives:
  /// the flight recorder keeps collectives by their numbers, and sends and receives are
  /// numbered apart, so theirs would mark the collective of the same number failed.
  [[noreturn]] void fail(const ErrorContext& op, const Error& error);
  /// fail() for collective `seq`, which the flight recorder marks failed first.
  [[noreturn]] void fail_collective(const OpInfo& info, std::uint32_t seq, const Error& error);
  void poison(const Error& cause) noexcept;
  /// What `op` (its fields; this communicator is added) fails with once the communicator is
  /// poisoned.
  Error poisoned_error(ErrorContext op) const;
  /// Appends "17" or "17 (ring)".
  static void append_number_and_algorithm(std::string& what, const OpInfo& info, std::uint32_t seq);
  /// "allreduce #17 (ring)" into what_ (the name the transport's messages use), rewriting only
  /// what changed since the last op.
  void name_running_op(const OpInfo& info, std::uint32_t seq);
  void thread_main() noexcept;
  /// Takes the queue's front op and drives it to its end; `lock` (on mutex_, with busy_ false)
  /// is released on the way and not retaken.
  void run_front(std::unique_lock<std::mutex>& lock) noexcept;
  /// One non-blocking drive step on a thread waiting on a Work (ProgressHook::help): polls the
  /// in-flight sends/receives (on the fast path when it is open) or posts the next queued one,
  /// unless another thread is driving.
  void help() noexcept;

  transport::Transport& transport_;
  transport::LazyArena* arenas_;
  algorithms::HostGroups* host_groups_;
  /// The running collective's name (OpContext::what); only the driving thread touches it.
  std::string what_;
  /// what_'s "<collective> #" part: its length, and which collective it names (driving thread).
  std::size_t what_prefix_ = 0;
  Collective what_kind_ = Collective::Barrier;
  /// The op number what_ ends with, when nothing follows it (no forced algorithm's name).
  std::optional<std::uint32_t> what_seq_;
  /// The running collective's algorithm once known (note_algorithm); driving thread only.
  Algorithm ran_ = Algorithm::Auto;
  /// Takes its own mutex, at times inside mutex_ (enqueue_locked), never the other way round.
  FlightRecorder recorder_;
  const int rank_;
  const int size_;
  const std::uint32_t comm_id_;
  const std::uint32_t tag_id_;
  // Touched only by the thread currently driving (busy_ or fast_active_ set by it).
  algorithms::ScratchPool scratch_;
  algorithms::SelectionMemo choices_;
  InFlightTransfers in_flight_;
  /// The state the next fast send/receive will report through, made before it is posted; a
  /// send done at post leaves it here for the one after (see submit_p2p).
  std::shared_ptr<detail::WorkState> spare_work_;

  // State machine. The fields from here to poisoned_ are guarded by mutex_ unless atomic;
  // in_flight_, spare_work_, scratch_, choices_ and what_ above belong to whichever thread
  // holds busy_ or fast_active_.
  // - fast_open_: the fast path may be taken. true only while nothing is queued or driving
  //   (busy_) and the executor is not poisoned; sends/receives in flight do not close it. Stored
  //   under mutex_: false by every path that queues, claims busy_ or poisons
  //   (close_fast_path_locked), and by the progress thread before it polls in-flight transfers;
  //   true by end_drive() when it leaves nothing queued.
  // - fast_active_: a thread runs an op on the fast path by a shared claim. kClaimIdle ->
  //   kClaimNumbering by compare-exchange (try_claim_fast); the claim holds only if fast_open_
  //   is still true after it (Dekker: both are seq_cst, so a closer that then reads
  //   fast_active_ idle knows no fast op can start); kClaimRunning once the op has its number.
  //   Back to kClaimIdle by that thread alone, with a release store (end_fast_drive). No one
  //   claims busy_ while it is not idle: callers that find it so queue their op (or, failing the
  //   communicator, leave the rest to the fast op), and the progress thread polls it
  //   (kFastOpPoll, or kPollInterval when only transfers wait), since the fast op's end wakes
  //   nobody.
  // - busy_: false -> true by a thread claiming the drive, only while false and with
  //   fast_active_ and owner_state_ idle: an inline run() or run_p2p() (queue empty), submit_p2p()
  //   posting from its caller (queue empty), run_front() taking the queue's front (progress thread
  //   or a helping waiter), or a poll of in_flight_ (progress thread, or a waiter in help()). true
  //   -> false only by that same thread, in end_drive() (DriveGuard), on every path out.
  // - pending_count_: in_flight_.count() as of the last drive; written only by the driver at
  //   its end (end_drive() under mutex_, end_fast_drive() without), so threads not driving can
  //   tell whether there is anything to poll without touching in_flight_. While > 0 the
  //   progress thread polls every kPollInterval.
  // - idle_: set and cleared only by the progress thread, under mutex_, around its untimed
  //   sleep (queue empty, nothing in flight). Who leaves work for a sleeping thread wakes it:
  //   end_drive() under mutex_; a fast driver that took pending_count_ from 0 (seq_cst store,
  //   then a seq_cst load of idle_, against the thread's seq_cst store of idle_ and load of
  //   pending_count_: one of the two sees the other) takes mutex_ and notifies. Timed sleeps
  //   need no wake.
  // - stop_: false -> true once, by the destructor. The progress thread exits once it is set
  //   and nothing is queued, driving or in flight (every transfer ends by its own deadline).
  // - poisoned_: empty -> the first failure, once, by poison() on the driving thread, or by
  //   abort(), end_external(), fail_communicator() or fail_from_wait() before they hand the
  //   poisoning to a driver (poison_unhandled_) or claim the drive for it; never cleared. It is set
  //   before any Work fails, so whoever sees a failure sees later calls fail fast. poison() then
  //   empties queue_ and in_flight_ (failing their Works, the failed transfer's with the cause);
  //   run*/submit* throw on entry and ops queued meanwhile fail when taken.
  // - bias_, bias_thread_, owner_state_: the biased claim (see the file's comment). bias_
  //   kUnbiased -> kBiased only under mutex_, by the bias thread itself while it holds a
  //   shared claim (count_toward_bias), with the fast path open and nothing queued or in
  //   flight. kBiased -> kRevoking -> kUnbiased under mutex_ by revoke_bias_locked(): while it
  //   fences and waits out a claim in kClaimNumbering, neither kind of claim starts; its
  //   release store of kUnbiased follows its last look at owner_state_, so a shared claimer
  //   that reads kUnbiased sees that state or a later one. kBiased -> kUnbiased also by the
  //   bias thread itself: under mutex_ when it revokes its own bias (no fence needed), and
  //   without it at the end of a biased op that leaves a transfer in flight (end_fast_drive),
  //   with a release store before its owner_state_ goes idle.
  //   bias_thread_ is set once, with the first bias. owner_state_ is written by the bias thread
  //   alone: kClaimNumbering from its first store of a biased claim until it has its number
  //   (take_numbers), kClaimRunning until the op ends, kClaimIdle otherwise. Only one thread ever
  //   writes it, so a claim it began before a revocation and gives up after one cannot clobber
  //   another thread's state.
  std::atomic<bool> fast_open_{true};
  std::atomic<std::uint8_t> fast_active_{kClaimIdle};
  static constexpr std::uint8_t kUnbiased = 0, kBiased = 1, kRevoking = 2;
  std::atomic<std::uint8_t> bias_{kUnbiased};
  std::atomic<pthread_t> bias_thread_{};
  bool bias_thread_set_ = false;  // guarded
  std::atomic<std::uint8_t> owner_state_{kClaimIdle};
  /// Fast ops in a row by one thread, with nothing left in flight (count_toward_bias; touched
  /// only by the thread driving, which ends a streak when it drives off the fast path).
  pthread_t streak_thread_{};
  std::uint32_t streak_ = 0;
  /// The streak that earns the bias: kBiasAfterOps, doubled by every revocation from another
  /// thread (written under mutex_, read by shared claim holders).
  std::atomic<std::uint32_t> bias_after_ops_{kBiasAfterOps};
  /// membarrier is unavailable here: no bias, ever (written under mutex_).
  std::atomic<bool> bias_refused_{false};
  std::atomic<std::uint64_t> bias_grants_{0};  // written under mutex_
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<QueuedOp> queue_;  // pushed by callers, popped by the driver, emptied by poison()
  bool busy_ = false;
  bool stop_ = false;
  std::atomic<std::size_t> pending_count_{0};
  std::atomic<bool> idle_{false};
  /// The progress thread exists (set once, under mutex_): a fast send/receive may leave a
  /// transfer in flight only then, since someone must poll it while its owner computes.
  std::atomic<bool> thread_started_{false};
  // Collectives and point-to-point ops are numbered separately: every rank makes the same
  // collective calls, so collective numbers (which form the message tags) agree across ranks,
  // while point-to-point calls differ per rank and use the user's tag instead.
  // Next collective's sequence number: taken by fetch_add on the fast path and under mutex_
  // elsewhere. A fast op takes its number after its claim, and a queued op after closing the
  // fast path, so numbers follow the order in which ops run on this rank.
  std::atomic<std::uint32_t> next_seq_{0};
  /// Next send/recv's number (for messages only): fetch_add, on the fast path or under mutex_.
  std::atomic<std::uint32_t> next_p2p_seq_{0};
  std::optional<Error> poisoned_;  // guarded: the first failure
  bool poison_logged_ = false;     // guarded: poison() has logged the failure
  /// Set (after poisoned_) by abort() or a failed external op that found another thread
  /// driving: that driver may be polling in-flight transfers (a Work::wait helping, or this
  /// thread), and a poll never looks at the transport's interruption. poll_pending() takes it
  /// and poisons, so those transfers fail with the cause instead of running to their deadline.
  std::atomic<bool> poison_unhandled_{false};
  /// queue_ may hold a send/receive (set under mutex_ by enqueue_locked; cleared under it when
  /// post_queued_transfers() or poison() leaves none): lets the side work skip the lock.
  std::atomic<bool> transfers_queued_{false};
  /// The footprint of the queued collective running now (set by run_front, cleared by
  /// end_drive; guarded by mutex_): a queued transfer touching it waits for its end.
  Footprint running_footprint_;
  /// A thread in Work::wait asked for a poll of the transfers (help() found another driver):
  /// the side work polls at once rather than every kServesPerPoll-th round.
  std::atomic<bool> waiter_asked_{false};
  /// Rounds the side work let go by without polling the transfers in flight (driver only).
  std::uint32_t serves_since_poll_ = 0;
  /// Transfers in flight as the side work last saw them (written by the driver inside another
  /// op's waits; 0 once it saw none): tells help() to ask for a poll of transfers that the
  /// side work posted, which pending_count_ does not count until the drive ends.
  std::atomic<std::size_t> served_in_flight_{0};
  /// Installed in the transport, the arena and the host groups; serves serve_in_wait().
  transport::SideWork side_work_;
  std::shared_ptr<detail::ProgressHook> hook_;  ///< handed (weakly) to every Work
  std::thread thread_;
};

template <class F>
void Executor::run(OpInfo info, F&& body) {
  if (FastClaim claim(*this); claim) {
    execute(info, claim.number(next_seq_), BodyRef(body));
    return;
  }
  std::unique_lock lock(mutex_);
  throw_if_poisoned_locked(info.kind);
  close_fast_path_locked();
  if (drive_free_locked() && queue_.empty()) {
    busy_ = true;
    const std::uint32_t seq = next_seq_.fetch_add(1, std::memory_order_relaxed);
    lock.unlock();
    DriveGuard guard(*this);
    execute(info, seq, BodyRef(body));
    return;
  }
  // Something is ahead: queue behind it. `body` outlives the op because we wait for it here.
  auto work = enqueue_locked(lock, std::move(info), OpBody(std::ref(body)), std::nullopt);
  lock.unlock();
  Work(std::move(work)).wait();
}

}  // namespace cohort::comm
