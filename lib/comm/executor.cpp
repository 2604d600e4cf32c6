#include "comm/executor.hpp"

#include "algorithms/host_groups.hpp"

#include "core/coarse_clock.hpp"
#include "core/decimal_count_up.hpp"
#include "core/log.hpp"
#include "core/mappable_memory.hpp"
#include "core/process_fence.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <system_error>
#include <thread>
#include <utility>

#include <pthread.h>

namespace cohort::comm {
namespace {

using Clock = std::chrono::steady_clock;

// While sends/receives are in flight and nothing else is queued, the progress thread polls them
// once per interval. Not more often on purpose: a thread waiting on a Work polls for itself
// (help()), and every extra wake of this thread takes a core from it. Measured, 4 B sendrecv:
// woken for every post, 30 us at 2 ranks; polling after 250 us, 2.1-2.6 us; after 1 ms,
// 1.3-1.7 us (Open MPI 0.4). Transfers nobody waits on advance at this pace.
constexpr std::chrono::microseconds kPollInterval{1000};

// How often the progress thread looks whether a fast-path op has ended, when ops are queued
// behind it. Only concurrent calls from several threads of one communicator get here (transfers
// in flight alone wait for kPollInterval).
constexpr std::chrono::microseconds kFastOpPoll{100};

// While transfers are in flight during another op, its waits on the transport poll them only
// every this many rounds unless one was just posted or a waiter asks: those waits drive the
// transport themselves, so a poll only finishes the Works of transfers already done, and it
// tests every one of them. Waits on shared memory drive nothing: there every round polls.
constexpr std::uint32_t kServesPerPoll = 16;

// testing::bias_after_ops(): 0, or the streak that earns the bias in executors made next.
std::atomic<std::uint32_t> testing_bias_after_ops{0};

}  // namespace

Executor::Executor(transport::Transport& transport, transport::LazyArena* arenas,
                   algorithms::HostGroups* host_groups, int rank, int size, std::uint32_t comm_id,
                   std::uint32_t tag_id, std::string job_id)
    : transport_(transport),
      arenas_(arenas),
      host_groups_(host_groups),
      recorder_(RecorderIdentity{std::move(job_id), comm_id, rank, size}),
      rank_(rank),
      size_(size),
      comm_id_(comm_id),
      tag_id_(tag_id),
      in_flight_(transport, tag_id),
      side_work_(
          [](void* self, transport::WaitKind wait) noexcept {
            static_cast<Executor*>(self)->serve_in_wait(wait);
          },
          this),
      hook_(std::make_shared<detail::ProgressHook>()) {
  if (const std::uint32_t ops = testing_bias_after_ops.load(std::memory_order_relaxed); ops > 0)
    bias_after_ops_.store(ops, std::memory_order_relaxed);
  // Here, not at the first bias: registering may wait for an RCU grace period (milliseconds on
  // older kernels), which an op holding the mutex should not.
  if (!process_fence_available()) bias_refused_.store(true, std::memory_order_relaxed);
  hook_->context = this;
  hook_->help = [](void* self) noexcept { static_cast<Executor*>(self)->help(); };
  transport_.set_side_work(&side_work_);
  if (arenas_ != nullptr) arenas_->set_side_work(&side_work_);
  if (host_groups_ != nullptr) host_groups_->set_side_work(&side_work_);
}

Executor::~Executor() {
  {
    // Waits for a Work::wait that is helping right now; later ones find no help.
    std::lock_guard helping(hook_->mutex);
    hook_->help = nullptr;
  }
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  // A failed op's receive UCX still fills may be writing into the scratch: the transport keeps
  // it that long (dropped at once when nothing of this communicator is left in flight).
  try {
    transport_.retain_until_quiet(tag_id_,
                                  std::make_shared<algorithms::ScratchPool>(std::move(scratch_)));
  } catch (const std::bad_alloc&) {
  }
  // Nothing drives any more: no wait runs on them.
  transport_.set_side_work(nullptr);
  if (arenas_ != nullptr) arenas_->set_side_work(nullptr);
  if (host_groups_ != nullptr) host_groups_->set_side_work(nullptr);
}

Work Executor::submit(OpInfo info, OpBody body) {
  std::unique_lock lock(mutex_);
  throw_if_poisoned_locked(info.kind);
  close_fast_path_locked();
  return Work(enqueue_locked(lock, std::move(info), std::move(body), std::nullopt));
}

void Executor::run_p2p(std::chrono::milliseconds timeout, const PointToPoint& p2p) {
  if (FastClaim claim(*this); claim) {
    execute_p2p_blocking(timeout, claim.number(next_p2p_seq_), p2p);
    return;
  }
  std::unique_lock lock(mutex_);
  throw_if_poisoned_locked(p2p.is_send ? Collective::Send : Collective::Recv);
  close_fast_path_locked();
  if (drive_free_locked() && queue_.empty()) {
    busy_ = true;
    const std::uint32_t seq = next_p2p_seq_.fetch_add(1, std::memory_order_relaxed);
    lock.unlock();
    DriveGuard guard(*this);
    execute_p2p_blocking(timeout, seq, p2p);
    return;
  }
  auto work = enqueue_locked(lock, p2p_info(timeout, p2p), nullptr, p2p);
  lock.unlock();
  Work(std::move(work)).wait();
}

void Executor::run_sendrecv(std::chrono::milliseconds timeout, PointToPoint recv,
                            PointToPoint send) {
  // One claim of the drive and one transport wait for both halves, unless another op drives or
  // is queued: then two transfers, below.
  if (FastClaim claim(*this); claim) {
    execute_sendrecv_blocking(timeout, claim.number(next_p2p_seq_, 2), recv, send);
    return;
  }
  {
    std::unique_lock lock(mutex_);
    if (poisoned_) throw poisoned_error(ErrorContext{.op = "sendrecv"});
    close_fast_path_locked();
    if (drive_free_locked() && queue_.empty()) {
      busy_ = true;
      const std::uint32_t seq = next_p2p_seq_.fetch_add(2, std::memory_order_relaxed);
      lock.unlock();
      DriveGuard guard(*this);
      execute_sendrecv_blocking(timeout, seq, recv, send);
      return;
    }
  }
  // Two transfers, the receive first (queued behind what is ahead, or posted now), both ended
  // before this returns: the caller may free the buffers then. A failure is reported by the
  // communicator's first cause (a failed transfer poisons it), not by the other half's
  // "unusable" that followed from it.
  Work received = submit_p2p(timeout, std::move(recv));
  Work sent;
  try {
    sent = submit_p2p(timeout, std::move(send));
  } catch (...) {
    try {
      received.wait();  // posted into the caller's buffer: it must end before we return
    } catch (...) {
      // Its outcome is not what the caller hears about.
    }
    throw;
  }
  std::exception_ptr failure;
  for (const Work* work : {&received, &sent}) {
    try {
      work->wait();
    } catch (...) {
      if (!failure) failure = std::current_exception();
    }
  }
  if (!failure) return;
  if (const std::optional<Error> cause = error()) throw *cause;
  std::rethrow_exception(failure);
}

Work Executor::submit_p2p(std::chrono::milliseconds timeout, PointToPoint p2p) {
  // Posting never blocks, so the caller's thread posts whenever nothing is ahead. The first
  // send/receive takes the locked path below, which starts the progress thread.
  if (thread_started_.load(std::memory_order_acquire)) {
    if (FastClaim claim(*this); claim) {
      const auto label = label_p2p(p2p, claim.number(next_p2p_seq_));
      // The state is ready before the transfer is posted (holding it must not fail then), but
      // a send done at post shares detail::finished_work(), and this one waits for the next.
      if (spare_work_) {
        spare_work_->relabel(label);
      } else {
        spare_work_ = new_work(label);
      }
      if (post_transfer(std::move(p2p), timeout, spare_work_) ==
          InFlightTransfers::Posted::Finished)
        return Work(detail::finished_work());
      return Work(std::exchange(spare_work_, nullptr));
    }
  }
  std::unique_lock lock(mutex_);
  throw_if_poisoned_locked(p2p.is_send ? Collective::Send : Collective::Recv);
  close_fast_path_locked();
  if (!drive_free_locked() || !queue_.empty())
    return Work(enqueue_locked(lock, p2p_info(timeout, p2p), nullptr, std::move(p2p)));
  // Nothing ahead and nobody driving: post from this thread (posting never blocks), so neither
  // this call nor its completion waits for the progress thread to wake up. The op may stay in
  // flight after this call returns; someone must keep polling it while its owner computes or
  // sleeps in Work::wait. What may throw comes before the drive is claimed.
  start_thread_or_fail(lock, p2p.is_send ? Collective::Send : Collective::Recv);
  const std::uint32_t seq = next_p2p_seq_.load(std::memory_order_relaxed);
  auto work = new_work(label_p2p(p2p, seq));
  next_p2p_seq_.fetch_add(1, std::memory_order_relaxed);
  busy_ = true;
  lock.unlock();
  QueuedOp op{p2p_info(timeout, p2p), seq, nullptr, std::move(p2p), work};
  {
    DriveGuard guard(*this);
    execute_queued(op);
  }
  return Work(std::move(work));
}

template <class Label>
std::shared_ptr<detail::WorkState> Executor::new_work(Label label) const {
  auto work = std::make_shared<detail::WorkState>(std::move(label));
  work->hook = hook_;
  return work;
}

std::uint32_t Executor::begin_external(const OpInfo& info) {
  std::unique_lock lock(mutex_);
  throw_if_poisoned_locked(info.kind);
  // It takes a number while a fast op may be numbering too: not by a biased claim's plain
  // store. The bias thread itself keeps its bias: it runs no claim while it is here, and no
  // other thread numbers while the bias holds.
  if (!::pthread_equal(bias_thread_.load(std::memory_order_relaxed), ::pthread_self()))
    revoke_bias_locked();
  const bool p2p = info.kind == Collective::Send || info.kind == Collective::Recv;
  const std::uint32_t seq =
      (p2p ? next_p2p_seq_ : next_seq_).fetch_add(1, std::memory_order_relaxed);
  lock.unlock();
  if (!p2p)
    recorder_.external_started(seq, info.kind, info.forced, info.shape, info.timeout,
                               FlightRecorder::coarse_now());
  return seq;
}

void Executor::end_external(const OpInfo& info, std::uint32_t seq, const Error* failure) noexcept {
  const bool p2p = info.kind == Collective::Send || info.kind == Collective::Recv;
  if (failure == nullptr) {
    if (!p2p) recorder_.external_done(seq, FlightRecorder::coarse_now());
    return;
  }
  if (!p2p) recorder_.external_failed(seq, *failure, Clock::now());
  std::unique_lock lock(mutex_);
  fail_communicator(lock, *failure);
}

void Executor::fail_communicator(std::unique_lock<std::mutex>& lock,
                                 const Error& failure) noexcept {
  // As abort(): the cause first, then whoever drives the transport now fails through it; if
  // nobody does, this thread claims the drive and fails what is queued and in flight.
  try {
    if (!poisoned_) poisoned_ = failure;
  } catch (...) {
    // Out of memory copying the cause: an earlier one, if any, stays.
  }
  close_fast_path_locked();
  if (!poisoned_) return;
  if (!drive_free_locked()) {
    try {
      interrupt_waits(interrupted_by(*poisoned_));
    } catch (...) {
      interrupt_waits({});  // out of memory naming it: the waits still throw
    }
    poison_unhandled_.store(true, std::memory_order_release);
    lock.unlock();
    return;
  }
  busy_ = true;
  lock.unlock();
  DriveGuard guard(*this);
  poison(*poisoned_);
}

void Executor::throw_if_poisoned_locked(Collective kind) const {
  if (poisoned_) throw poisoned_error(ErrorContext{.op = std::string(collective_name(kind))});
}

void Executor::check_usable_locked_path(Collective kind) const {
  std::lock_guard lock(mutex_);
  throw_if_poisoned_locked(kind);
}

Error Executor::poisoned_error(ErrorContext op) const {
  op.communicator = comm_id_;
  return Error(
      ErrorCode::InvalidUsage,
      fmt::format("communicator {} is unusable after a failure (its ops fail together): {}",
                  comm_id_, poisoned_->what()),
      std::move(op));
}

std::shared_ptr<detail::WorkState> Executor::enqueue_locked(std::unique_lock<std::mutex>& lock,
                                                            OpInfo info, OpBody body,
                                                            std::optional<PointToPoint> p2p) {
  // Before anything is numbered or queued: an op that cannot run leaves nothing behind.
  start_thread_or_fail(lock, info.kind);
  const std::uint32_t seq =
      (p2p ? next_p2p_seq_ : next_seq_).fetch_add(1, std::memory_order_relaxed);
  auto work = p2p ? new_work(label_p2p(*p2p, seq))
                  : new_work(detail::CollectiveLabel{info.kind, seq, info.forced, comm_id_});
  const FlightRecorder::TimePoint now = FlightRecorder::coarse_now();
  if (!p2p) recorder_.queued(seq, info.kind, info.forced, info.shape, info.timeout, now);
  const bool transfer = p2p.has_value();
  queue_.push_back(QueuedOp{std::move(info), seq, std::move(body), std::move(p2p), work, now});
  if (!busy_) wake_.notify_one();
  if (transfer) {
    // Posted by whoever drives now, from inside its op's waits (or, when nobody does, by the
    // next op's, or when it reaches the front); a driver asleep in a wait is woken for it.
    transfers_queued_.store(true, std::memory_order_relaxed);
    side_work_.request();
    if (!drive_free_locked()) transport_.wake_waiters();
  }
  return work;
}

namespace testing {
namespace {
std::atomic<bool> refuse_threads{false};
}  // namespace
void refuse_progress_threads(bool refuse) noexcept {
  refuse_threads.store(refuse, std::memory_order_relaxed);
}
void bias_after_ops(std::uint32_t ops) noexcept {
  testing_bias_after_ops.store(ops, std::memory_order_relaxed);
}
std::atomic<void (*)()> biased_claim_hook{nullptr};
}  // namespace testing

void Executor::start_thread_or_fail(std::unique_lock<std::mutex>& lock, Collective kind) {
  if (thread_.joinable()) return;
  try {
    if (testing::refuse_threads.load(std::memory_order_relaxed))
      throw std::system_error(std::make_error_code(std::errc::resource_unavailable_try_again),
                              "refused for a test");
    thread_ = std::thread([this] { thread_main(); });
  } catch (const std::system_error& e) {
    // Out of threads (RLIMIT_NPROC, memory for a stack). The op cannot run on this rank while
    // its peers run it, and the ops after it would pair with theirs out of step: the
    // communicator fails, as after a transport error.
    const Error failure(
        ErrorCode::SystemError,
        fmt::format("communicator {} could not start its progress thread "
                    "(cohort-progress): {}",
                    comm_id_, e.what()),
        ErrorContext{.op = std::string(collective_name(kind)), .communicator = comm_id_});
    fail_communicator(lock, failure);
    throw failure;
  }
  // Named for top -H, debuggers and the tests that watch it sleep. Best effort, and here rather
  // than in the thread: the name is there once the op that started the thread returns.
  ::pthread_setname_np(thread_.native_handle(), "cohort-progress");
  thread_started_.store(true, std::memory_order_release);
}

void Executor::abort(const std::string& reason) noexcept {
  std::unique_lock lock(mutex_);
  try {
    if (!poisoned_)
      poisoned_ = Error(ErrorCode::InvalidUsage,
                        fmt::format("communicator {} was aborted: {}", comm_id_, reason),
                        ErrorContext{.communicator = comm_id_});
  } catch (...) {
    // Out of memory formatting the cause: the interruption below still fails every op.
  }
  close_fast_path_locked();
  // The cause is set first, so it is the one that stays; then the thread driving now (in a wait,
  // or about to be) leaves it with an error that poisons through fail() like any other failure.
  try {
    interrupt_waits("aborted: " + reason);
  } catch (...) {
    interrupt_waits({});  // out of memory naming it: the waits still throw ("aborted")
  }
  if (!poisoned_) return;
  if (!drive_free_locked()) {
    poison_unhandled_.store(true, std::memory_order_release);
    return;
  }
  // Nobody is driving: fail what is queued and in flight from here.
  busy_ = true;
  lock.unlock();
  DriveGuard guard(*this);
  poison(*poisoned_);  // set once above or before, never reassigned: safe to read unlocked
}

void Executor::interrupt_waits(const std::string& reason) noexcept {
  transport_.interrupt(reason);
  if (arenas_ != nullptr) arenas_->interrupt(reason);
  if (host_groups_ != nullptr) host_groups_->interrupt(reason);
}

std::optional<Error> Executor::error() const {
  std::lock_guard lock(mutex_);
  return poisoned_;
}

void Executor::take_unhandled_poison() noexcept {
  // poisoned_ was set before the flag and is never reassigned: readable after the acquire. A
  // load first: an exchange (a locked write) at every poll would cost each small send/recv.
  if (poison_unhandled_.load(std::memory_order_relaxed) &&
      poison_unhandled_.exchange(false, std::memory_order_acquire)) [[unlikely]]
    poison(*poisoned_);
}

void Executor::end_drive() noexcept {
  // Still the driver: an abort() handed to this drive that no poll took (nothing was in
  // flight, the op ended without meeting the interruption) is handled here.
  take_unhandled_poison();
  streak_ = 0;  // a drive off the fast path breaks a streak of fast ops
  bool wake = false;
  {
    std::lock_guard lock(mutex_);
    busy_ = false;
    running_footprint_ = Footprint{};
    const std::size_t pending = in_flight_.count();
    pending_count_.store(pending, std::memory_order_relaxed);
    // Nothing queued: the next op may take the fast path. Release: whatever this drive wrote
    // (scratch, in_flight_, the name) happens before that op reads it.
    if (queue_.empty() && !poisoned_ && !stop_) fast_open_.store(true, std::memory_order_release);
    // In-flight sends/receives only need the thread when it sleeps without a timeout; from its
    // timed sleeps it comes back to them by itself.
    wake = !queue_.empty() || stop_ || (pending > 0 && idle_.load(std::memory_order_relaxed));
  }
  if (wake) wake_.notify_all();
}

void Executor::end_fast_drive(Claim claim) noexcept {
  take_unhandled_poison();  // as end_drive()
  const std::size_t before =
      pending_count_.load(std::memory_order_relaxed);  // ours, or handed to us
  const std::size_t pending = in_flight_.count();
  // The claim's end, after the last touch of what the driver owns: a release store of
  // whichever flag this claim set.
  const auto release_claim = [this, claim]() noexcept {
    if (claim == Claim::Biased) {
      owner_state_.store(kClaimIdle, std::memory_order_release);
    } else {
      fast_active_.store(kClaimIdle, std::memory_order_release);
    }
  };
  if (pending > 0 && claim == Claim::Biased) {
    // The progress thread will poll them, and would revoke the bias (a membarrier) for each
    // poll: drop it here instead, where no fence is needed (the bias thread's own claims are
    // the only biased ones).
    bias_.store(kUnbiased, std::memory_order_release);
  }
  if (claim == Claim::Shared) {
    if (pending == 0) {
      count_toward_bias();
    } else {
      streak_ = 0;  // "in a row" means with nothing left in flight
    }
  }
  if (pending == before || before > 0 || pending == 0) {
    // The thread already polls on a timer (before > 0), or has nothing to poll.
    if (pending != before) pending_count_.store(pending, std::memory_order_release);
    release_claim();
    return;
  }
  // The first transfer in flight: the progress thread may be asleep without a timeout, and must
  // come back to poll it while its owner computes (see idle_).
  pending_count_.store(pending, std::memory_order_seq_cst);
  release_claim();
  if (idle_.load(std::memory_order_seq_cst)) {
    // It set idle_ and looked at pending_count_ under the mutex before it slept: taking the
    // mutex here waits until it sleeps, so the notification cannot slip in between.
    { std::lock_guard lock(mutex_); }
    wake_.notify_all();
  }
}

void Executor::count_toward_bias() noexcept {
  if (bias_refused_.load(std::memory_order_relaxed)) return;
  const pthread_t me = ::pthread_self();
  if (!::pthread_equal(streak_thread_, me)) {
    streak_thread_ = me;
    streak_ = 0;
  }
  if (++streak_ < bias_after_ops_.load(std::memory_order_relaxed)) return;
  streak_ = 0;
  // This thread holds a shared claim: nobody else drives, and every other claim fails until
  // it ends, so the bias is set while no biased claim can be under way.
  std::lock_guard lock(mutex_);
  // in_flight_ is this driver's to read; pending_count_ may still hold the count this op
  // began with (end_fast_drive publishes it after this).
  if (!fast_open_.load(std::memory_order_relaxed) || !queue_.empty() || poisoned_ || stop_ ||
      in_flight_.count() > 0)
    return;
  // Only ever one thread: owner_state_ has a single writer (see it).
  if (bias_thread_set_ && !::pthread_equal(bias_thread_.load(std::memory_order_relaxed), me))
    return;
  bias_thread_.store(me, std::memory_order_relaxed);
  bias_thread_set_ = true;
  bias_.store(kBiased, std::memory_order_release);
  bias_grants_.fetch_add(1, std::memory_order_relaxed);
}

void Executor::revoke_bias_locked() noexcept {
  // Acquire: a bias the bias thread dropped itself comes with its owner_state_ from before.
  if (bias_.load(std::memory_order_acquire) != kBiased) return;
  // The bias thread revoking its own bias runs no biased claim of its own meanwhile.
  if (::pthread_equal(bias_thread_.load(std::memory_order_relaxed), ::pthread_self())) {
    bias_.store(kUnbiased, std::memory_order_release);
    return;
  }
  bias_.store(kRevoking, std::memory_order_relaxed);
  // Pairs with the biased claim's unfenced store-then-load (an asymmetric fence: membarrier
  // stands in for the fence the claim leaves out, an ordering C++ itself cannot express): after
  // this, a claim that did not see the revocation shows kClaimNumbering or later here.
  process_fence();
  while (owner_state_.load(std::memory_order_acquire) == kClaimNumbering) std::this_thread::yield();
  bias_.store(kUnbiased, std::memory_order_release);
  // Threads that take turns: make the next bias cost a longer streak.
  const std::uint32_t after = bias_after_ops_.load(std::memory_order_relaxed);
  if (after < (1U << 30)) bias_after_ops_.store(after * 2, std::memory_order_relaxed);
}

void Executor::append_number_and_algorithm(std::string& what, const OpInfo& info,
                                           std::uint32_t seq) {
  char digits[16];
  what.append(digits, std::to_chars(digits, digits + sizeof digits, seq).ptr);
  if (info.forced != Algorithm::Auto) {
    what += " (";
    what += algorithm_name(info.forced);
    what += ')';
  }
}

void Executor::name_running_op(const OpInfo& info, std::uint32_t seq) {
  // Ops of one kind follow each other (a training loop, a benchmark): only the number changes,
  // so the name's "allreduce #" stays in place and is not copied again, and the number, one
  // more than the last, is counted up in place (core/decimal_count_up.hpp says why).
  const bool same_kind = !what_.empty() && info.kind == what_kind_;
  if (same_kind && info.forced == Algorithm::Auto && what_seq_ && seq == *what_seq_ + 1 &&
      decimal_count_up(what_, what_prefix_)) {
    what_seq_ = seq;
    return;
  }
  if (!same_kind) {
    what_.assign(collective_name(info.kind));
    what_ += " #";
    what_prefix_ = what_.size();
    what_kind_ = info.kind;
  }
  what_.resize(what_prefix_);
  append_number_and_algorithm(what_, info, seq);
  what_seq_ = info.forced == Algorithm::Auto ? std::optional<std::uint32_t>(seq) : std::nullopt;
}

detail::PointToPointLabel Executor::label_p2p(const PointToPoint& p2p, std::uint32_t seq) const {
  return detail::PointToPointLabel{p2p.is_send, seq, p2p.peer, p2p.user_tag, comm_id_};
}

ErrorContext Executor::p2p_context(const PointToPoint& p2p, std::uint32_t seq) const {
  return detail::context_of(label_p2p(p2p, seq));
}

void Executor::fail(const ErrorContext& op, const Error& error) {
  // Layers below name what they know (the peers, the algorithm); the op's identity is added here
  // once, as fields, and the message formatted from them.
  Error failure = error.with_context(op);
  poison(failure);
  throw failure;
}

void Executor::fail_collective(const OpInfo& info, std::uint32_t seq, const Error& error) {
  Error failure = error.with_context(context_of(info, seq));
  recorder_.failed(seq, failure, Clock::now());
  poison(failure);
  throw failure;
}

ErrorContext Executor::context_of(const OpInfo& info, std::uint32_t seq) const {
  return ErrorContext{.op = std::string(collective_name(info.kind)),
                      .sequence = seq,
                      .communicator = comm_id_,
                      .algorithm = info.forced == Algorithm::Auto
                                       ? std::string()
                                       : std::string(algorithm_name(info.forced))};
}

void Executor::execute(const OpInfo& info, std::uint32_t seq, BodyRef body,
                       FlightRecorder::TimePoint queued_at) {
  name_running_op(info, seq);
  // The coarse clock (a deadline at most a tick late, never early): a precise read was a tenth
  // of a tiny collective's bookkeeping in a VM, and timeouts are seconds.
  const Clock::time_point start = coarse_now();
  recorder_.started(seq, info.kind, info.forced, info.shape, info.timeout, start, queued_at);
  ran_ = Algorithm::Auto;
  // Sends and receives left in flight by earlier drives are this op's to poll from its waits
  // (serve_in_wait keeps asking while any remain): otherwise nobody would, while this op holds
  // the drive, and one whose deadline passed would not fail until this op ended.
  if (in_flight_.count() > 0) side_work_.request();
  const algorithms::OpContext ctx{
      transport_,   rank_,    size_,
      tag_id_,      seq,      start + info.timeout + coarse_resolution(),
      scratch_,     what_,    arenas_,
      host_groups_, &choices_};
  if (info.fingerprint) {
    std::optional<std::string> disagreement;
    try {
      disagreement = verify_fingerprint(ctx, *info.fingerprint);
    } catch (const Error& e) {
      // Whatever its code (the transport's own InvalidArgument included): requests may be left.
      fail_collective(info, seq, e);
    } catch (const std::exception& e) {
      fail_collective(info, seq, Error(ErrorCode::Internal, e.what()));
    }
    if (disagreement) {
      // A mismatch is found by every rank after a complete exchange: nothing is in flight, so
      // the communicator stays usable.
      const Error mismatch =
          Error(ErrorCode::InvalidArgument, *disagreement).with_context(context_of(info, seq));
      recorder_.failed(seq, mismatch, Clock::now());
      throw mismatch;
    }
  }
  try {
    body(ctx);
  } catch (const Error& e) {
    fail_collective(info, seq, e);
  } catch (const std::exception& e) {
    fail_collective(info, seq, Error(ErrorCode::Internal, e.what()));
  }
  recorder_.done(seq, ran_, FlightRecorder::coarse_now());
}

void Executor::execute_sendrecv_blocking(std::chrono::milliseconds timeout, std::uint32_t seq,
                                         const PointToPoint& recv, const PointToPoint& send) {
  static const std::string kSendrecv = "sendrecv";
  // Named in full only when it fails (see execute_p2p_blocking).
  const auto name = [&] {
    return ErrorContext{.op = kSendrecv,
                        .sequence = seq,
                        .communicator = comm_id_,
                        .to_rank = send.peer,
                        .from_rank = recv.peer,
                        .tag = recv.user_tag};
  };
  try {
    in_flight_.run_blocking_pair(recv, send, coarse_deadline(timeout), kSendrecv);
  } catch (const Error& e) {
    fail(name(), e);
  } catch (const std::exception& e) {
    // Out of memory posting the send, say: the receive may be posted, and only the poisoning
    // cancels it before its buffer goes.
    fail(name(), Error(ErrorCode::Internal, e.what()));
  }
}

void Executor::execute_p2p_blocking(std::chrono::milliseconds timeout, std::uint32_t seq,
                                    const PointToPoint& p2p) {
  // Named in full only when it fails (fail() puts that name over the transport's): formatting
  // "send #3 to rank 1 (tag 7)" at every call cost as much as a small send itself.
  static const std::string kSend = "send", kRecv = "recv";
  try {
    in_flight_.run_blocking(p2p, coarse_deadline(timeout), p2p.is_send ? kSend : kRecv);
  } catch (const Error& e) {
    fail(p2p_context(p2p, seq), e);
  } catch (const std::exception& e) {
    fail(p2p_context(p2p, seq), Error(ErrorCode::Internal, e.what()));
  }
}

void Executor::execute_queued(QueuedOp& op) noexcept {
  bool ran = false;  // whether the op may have posted anything
  try {
    {
      std::lock_guard lock(mutex_);
      if (poisoned_) throw poisoned_error(op.work->context());
    }
    if (op.p2p) {
      // Post now (keeping order with every other op) and complete in the background.
      if (post_transfer(std::move(*op.p2p), op.info.timeout, op.work) ==
          InFlightTransfers::Posted::Finished)
        op.work->complete(nullptr);
      return;
    }
    ran = true;
    execute(op.info, op.seq, BodyRef(op.body), op.queued_at);
    // The buffers' owners go before the waiters wake, as a send's or receive's do: a finished
    // Work no longer holds its buffers (Python's exporters, say, may resize them at once).
    op.body = nullptr;
    op.work->complete(nullptr);
  } catch (...) {
    // What the failure left in flight at the transport may still touch the buffers: their
    // owners, in the body, stay with it until that ended (Transport::retain_until_quiet).
    try {
      if (ran) retain_until_quiet(std::make_shared<OpBody>(std::move(op.body)));
    } catch (const std::bad_alloc&) {
      COHORT_LOG_ERROR("out of memory keeping a failed op's buffers for the transport");
    }
    op.work->complete(std::current_exception());
  }
}

void Executor::retain_until_quiet(std::shared_ptr<void> keep, std::shared_ptr<void> also) noexcept {
  if (keep) transport_.retain_until_quiet(tag_id_, std::move(keep));
  if (also) transport_.retain_until_quiet(tag_id_, std::move(also));
}

InFlightTransfers::Posted Executor::post_transfer(
    PointToPoint&& p2p, std::chrono::milliseconds timeout,
    const std::shared_ptr<detail::WorkState>& work) noexcept {
  try {
    try {
      return in_flight_.post(std::move(p2p), timeout, work);
    } catch (const Error& e) {
      fail(work->context(), e);
    }
  } catch (...) {
    work->complete(std::current_exception());
  }
  return InFlightTransfers::Posted::Held;  // failed: `work` says so
}

void Executor::serve_in_wait(transport::WaitKind wait) noexcept {
  const bool posted = transfers_queued_.load(std::memory_order_relaxed) && post_queued_transfers();
  if (in_flight_.count() == 0) {
    if (served_in_flight_.load(std::memory_order_relaxed) != 0)
      served_in_flight_.store(0, std::memory_order_relaxed);
    return;
  }
  const bool asked = waiter_asked_.load(std::memory_order_relaxed) &&
                     waiter_asked_.exchange(false, std::memory_order_relaxed);
  if (posted || asked || wait == transport::WaitKind::WatchesMemory ||
      ++serves_since_poll_ >= kServesPerPoll) {
    serves_since_poll_ = 0;
    const InFlightTransfers::PollResult result = in_flight_.poll();
    if (result.failure) {
      fail_from_wait(result.failure->op, result.failure->error);
      return;
    }
  }
  // Until they end, this op's waits keep polling them: their owner may be asleep on a Work,
  // with nobody else to finish it before this op ends. And a thread waiting on one may ask for
  // a poll at once (help()), though pending_count_ counts only what was in flight when this
  // drive began.
  served_in_flight_.store(in_flight_.count(), std::memory_order_relaxed);
  if (in_flight_.count() > 0) side_work_.request();
}

bool Executor::post_queued_transfers() noexcept {
  // One at a time, the lock let go while posting: oldest first, so sends and receives keep
  // their order among themselves, while the collectives stay queued in theirs.
  bool posted = false;
  for (;;) {
    QueuedOp op;
    {
      std::lock_guard lock(mutex_);
      if (poisoned_) return posted;  // poison(), on its way, fails them
      const auto transfer = std::find_if(queue_.begin(), queue_.end(),
                                         [](const QueuedOp& q) { return q.p2p.has_value(); });
      if (transfer == queue_.end()) {
        transfers_queued_.store(false, std::memory_order_relaxed);
        return posted;
      }
      // A transfer that may touch a collective's memory waits for it (allreduce_async(x) then
      // send_async(x) sends the sum), and the later ones with it; run_front asks for this again
      // when the next collective starts.
      if (running_footprint_.conflicts_with(*transfer->p2p)) return posted;
      for (auto ahead = queue_.begin(); ahead != transfer; ++ahead)
        if (ahead->info.footprint.conflicts_with(*transfer->p2p)) return posted;
      op = std::move(*transfer);
      queue_.erase(transfer);
    }
    posted = true;
    try {
      try {
        if (in_flight_.post(std::move(*op.p2p), op.info.timeout, op.work) ==
            InFlightTransfers::Posted::Finished)
          op.work->complete(nullptr);
      } catch (const Error& e) {
        const ErrorContext transfer = op.work->context();
        fail_from_wait(transfer, e);
        throw e.with_context(transfer);
      }
    } catch (...) {
      op.work->complete(std::current_exception());
    }
  }
}

void Executor::fail_from_wait(const ErrorContext& op, const Error& error) noexcept {
  std::string reason;
  {
    std::lock_guard lock(mutex_);
    try {
      if (!poisoned_) poisoned_ = error.with_context(op);
      reason = interrupted_by(*poisoned_);
    } catch (...) {
      // Out of memory naming the failure: the cause as it came, or, failing that, nothing can
      // fail this transfer's Work any more (poll() skips it), so stop loudly rather than hang.
      try {
        if (!poisoned_) poisoned_ = error;
      } catch (...) {
        COHORT_LOG_ERROR("out of memory failing {} #{}", op.op, op.sequence.value_or(0));
        std::terminate();
      }
    }
    close_fast_path_locked();
  }
  interrupt_waits(reason);
  poison_unhandled_.store(true, std::memory_order_release);
}

std::string Executor::interrupted_by(const Error& failure) {
  return "interrupted by an earlier failure: " + std::string(failure.what());
}

bool Executor::poll_pending() noexcept {
  if (poison_unhandled_.load(std::memory_order_relaxed)) [[unlikely]] {
    take_unhandled_poison();
    return true;
  }
  const InFlightTransfers::PollResult result = in_flight_.poll();
  if (!result.failure) return result.completed > 0;
  try {
    fail(result.failure->op, result.failure->error);
  } catch (const Error&) {
    // Already delivered: poisoning cancelled in_flight_, which failed the transfer's Work with
    // the poison's first cause (the error fail() throws, unless abort() came first).
  }
  return true;
}

void Executor::poison(const Error& cause) noexcept {
  poison_unhandled_.store(false, std::memory_order_relaxed);  // handled here
  std::deque<QueuedOp> doomed;
  const Error* first = nullptr;  // poisoned_ is never reassigned once set
  bool log = false;
  {
    std::lock_guard lock(mutex_);
    if (!poisoned_) poisoned_ = cause;
    first = &*poisoned_;
    close_fast_path_locked();
    doomed.swap(queue_);
    transfers_queued_.store(false, std::memory_order_relaxed);
    // Once: an abort() landing while another driver is in here poisons again (to fail what it
    // may have missed), and its consequences are not news.
    log = !poison_logged_;
    poison_logged_ = true;
  }
  // The first cause, not `cause`: an op interrupted by an earlier failure (fail_from_wait, an
  // abort) comes here with that consequence, while the record names what poisoned it.
  if (log)
    COHORT_LOG_ERROR("communicator {} failed and will reject further ops: {}", comm_id_,
                     first->what());
  // Before any Work fails: a caller woken by the error may exit the process at once.
  recorder_.record_failure(*first);
  // Before any Work fails too: a caller woken by it may free a mappable buffer that a peer is
  // still writing the piece it was at into; it must not be handed out again.
  retire_live_mappable();
  // Cancels every request at the transport (the collectives' too), then fails the transfers:
  // a failed one with the first cause, which is its own error when it failed inside another
  // op's wait (fail_from_wait; that op's failure only followed from it).
  in_flight_.cancel_all(*first, [this](const ErrorContext& op) { return poisoned_error(op); });
  // The hierarchical algorithms' requests are the host groups' views' own (the leaders'
  // exchange posts into the op's output): cancelled too, before the op's Work fails.
  if (host_groups_ != nullptr) host_groups_->cancel_all();
  try {
    for (auto& op : doomed)
      op.work->complete(std::make_exception_ptr(poisoned_error(op.work->context())));
  } catch (const std::exception& e) {
    // Only allocation can fail here; the Works would then never finish, so abort loudly.
    COHORT_LOG_ERROR("failing queued ops after an error: {}", e.what());
    std::terminate();
  }
}

void Executor::run_front(std::unique_lock<std::mutex>& lock) noexcept {
  QueuedOp op = std::move(queue_.front());
  queue_.pop_front();
  busy_ = true;
  if (!op.p2p) {
    running_footprint_ = op.info.footprint;
    // Transfers held back by the collective that ran before may go now (post_queued_transfers).
    if (transfers_queued_.load(std::memory_order_relaxed)) side_work_.request();
  }
  lock.unlock();
  {
    DriveGuard guard(*this);
    execute_queued(op);
  }
  op = QueuedOp{};  // drop the body and its buffer owners outside the lock
}

void Executor::help() noexcept {
  if (FastClaim claim(*this); claim) {
    // Nothing is queued while the fast path is open: polling is the only step there is.
    claim.unnumbered();
    if (in_flight_.count() > 0) poll_pending();
    return;
  }
  std::unique_lock lock(mutex_);
  if (!drive_free_locked()) {
    // Another thread drives, perhaps for long (a collective waiting on a peer): the transfers
    // this waiter may be waiting on are polled from inside that op's waits.
    if (pending_count_.load(std::memory_order_relaxed) > 0 ||
        served_in_flight_.load(std::memory_order_relaxed) > 0) {
      waiter_asked_.store(true, std::memory_order_relaxed);
      side_work_.request();
    }
    return;
  }
  // Only steps that never block: posting a queued send/receive, or polling in-flight ones. A
  // queued collective stays with the progress thread, so Work::wait(timeout) can still give up
  // on time.
  if (!queue_.empty() && queue_.front().p2p) {
    run_front(lock);
    return;
  }
  if (pending_count_ == 0 || !queue_.empty()) return;
  // As thread_main does: no fast-path op may start while this thread polls (two drivers would
  // share the transport and in_flight_). One may have claimed just before the close.
  close_fast_path_locked();
  if (!drive_free_locked()) return;
  busy_ = true;
  lock.unlock();
  DriveGuard guard(*this);
  poll_pending();
}

void Executor::thread_main() noexcept {
  std::unique_lock lock(mutex_);
  for (;;) {
    const bool pending = pending_count_.load(std::memory_order_relaxed) > 0;
    // Something to drive: no fast op may start now, so the drive comes free for this thread.
    if (!queue_.empty() || pending) close_fast_path_locked();
    const bool drive_free = drive_free_locked();
    if (drive_free && !queue_.empty()) {
      run_front(lock);
      lock.lock();
      continue;
    }
    if (drive_free && pending) {
      busy_ = true;
      lock.unlock();
      bool progressed = false;
      {
        DriveGuard guard(*this);
        progressed = poll_pending();
      }
      // Sleeps between polls: a thread waiting on a Work polls for itself (help()), so this
      // loop only has to keep sends/receives moving while their owner computes.
      lock.lock();
      if (!progressed) wake_.wait_for(lock, kPollInterval);
      continue;
    }
    if (stop_ && drive_free && queue_.empty() && !pending) return;
    if (!busy_ && !drive_free && (!queue_.empty() || pending)) {
      // A fast-path op still runs: it began before this thread (or an op queued since) closed
      // the fast path, and its end wakes nobody. Look again shortly; transfers in flight alone
      // need no more than the usual poll interval.
      wake_.wait_for(lock, queue_.empty() ? kPollInterval : kFastOpPoll);
      continue;
    }
    // Asleep until woken: by end_drive() (busy_ now), or by a fast driver that leaves the first
    // transfer in flight. Against the latter, idle_ is stored before pending_count_ is looked at
    // again (see idle_).
    idle_.store(true, std::memory_order_seq_cst);
    if (busy_ || pending_count_.load(std::memory_order_seq_cst) == 0) wake_.wait(lock);
    idle_.store(false, std::memory_order_relaxed);
    if (!busy_ && queue_.empty() && pending_count_.load(std::memory_order_relaxed) > 0) {
      // Woken for sends/receives posted elsewhere: their owner is probably polling them right
      // now, so give it the first stretch.
      wake_.wait_for(lock, kPollInterval);
    }
  }
}

}  // namespace cohort::comm
