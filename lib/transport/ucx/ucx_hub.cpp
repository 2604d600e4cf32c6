#include "transport/ucx/ucx_hub.hpp"

#include <array>

#include <cohort/error.hpp>

#include "core/coarse_clock.hpp"
#include "core/log.hpp"
#include "transport/cpu_set.hpp"
#include "transport/host_identity.hpp"
#include "transport/host_span.hpp"
#include "transport/process_memory.hpp"
#include "transport/ucx/ucx_status.hpp"

#include <poll.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <new>
#include <thread>
#include <utility>

namespace cohort::transport::ucx {

namespace {

/// Room for one more element, grown geometrically, so that a push_back after it cannot throw.
template <class T>
void reserve_one_more(std::vector<T>& v) {
  if (v.size() == v.capacity()) v.reserve(std::max<std::size_t>(8, 2 * v.capacity()));
}

/// How long teardown may spend flushing endpoints to live peers.
constexpr std::chrono::milliseconds kCloseTimeout{2000};
/// How long cancel_all() progresses for cancelled receives to complete.
constexpr std::chrono::milliseconds kCancelTimeout{200};
/// Same-host peers' liveness is checked at most this often while polling with test().
constexpr std::chrono::milliseconds kLivenessInterval{10};

/// testing::set_sleep_hooks: written by a test before the waits it orders, read by each sleep.
/// The flag keeps the seam's lock off every other program's sleeps.
std::atomic<bool> sleep_hooks_set{false};
std::mutex sleep_hooks_mutex;
testing::SleepHooks sleep_hooks;

testing::SleepHooks current_sleep_hooks() {
  if (!sleep_hooks_set.load(std::memory_order_acquire)) return {};
  std::lock_guard lock(sleep_hooks_mutex);
  return sleep_hooks;
}

std::string address_key(const std::string& prefix, int rank) {
  return prefix + "/addr/" + std::to_string(rank);
}

}  // namespace

UcxHub::UcxHub(Store& store, const std::string& key_prefix, int rank, int size,
               int local_world_size, Deadline connect_deadline)
    : rank_(rank),
      size_(size),
      err_handling_(tunables().ucx_err_handling),
      tag_ids_(std::make_shared<TagIdPool>()),
      // Whether the world's hosts talk over TCP configures the UCX context (ucx_context.cpp),
      // which must exist before this rank's address can be published.
      worker_(UcxContext::shared(ranks_span_hosts(store, key_prefix, local_host_identity(), size,
                                                  time_left(connect_deadline)) &&
                                 !ucx_has_rdma())),
      probe_(random_probe()) {
  const std::string identity = local_host_identity();
  // The inbox's descriptor is published before anyone knows how many same-host ranks it serves;
  // it is sized below, before the handshake, so a peer maps it only once it is complete.
  struct InboxFd {
    int fd = tunables().shared_memory ? Fastbox::create_inbox_fd() : -1;
    ~InboxFd() {
      if (fd >= 0) close(fd);
    }
  } inbox_fd;
  const CpuSet own_cpus = affinity_cpus();
  store.set(address_key(key_prefix, rank),
            encode_peer_address({static_cast<std::uint32_t>(getpid()), identity, worker_.address(),
                                 inbox_fd.fd, reinterpret_cast<std::uintptr_t>(&probe_), probe_,
                                 own_cpus}));
  std::vector<CpuSet> host_cpu_sets;

  peers_.reserve(static_cast<std::size_t>(size));
  for (int p = 0; p < size; ++p) {
    // Each Peer is allocated before its endpoint, so the error callback's argument is stable.
    auto& peer = *peers_.emplace_back(std::make_unique<Peer>());
    peer.rank = p;
    const PeerAddress address =
        decode_peer_address(store.get(address_key(key_prefix, p), time_left(connect_deadline)), p);
    peer.same_host = address.host_identity == identity;
    if (peer.same_host) host_cpu_sets.push_back(address.cpus);
    const bool ucx_handles_failure = !peer.same_host || err_handling_ == PeerErrorHandling::Peer;
    if (peer.same_host && p != rank) peer.watch = ProcessWatch(static_cast<pid_t>(address.pid));
    peer.endpoint = UcxEndpoint(worker_, address.worker_address,
                                ucx_handles_failure ? &on_endpoint_error : nullptr, &peer);
    peer.pid = static_cast<pid_t>(address.pid);
    peer.fastbox_fd = address.fastbox_fd;
    // Its hub is alive: it stays in its constructor until this rank's handshake message comes.
    peer.readable = peer.same_host && p != rank && tunables().single_copy &&
                    check_probe(peer.pid, address.probe_at, address.probe) == 0;
  }
  host_cpus_ = cpus_in_union(host_cpu_sets, std::thread::hardware_concurrency());
  policy_ = choose_wait_policy(local_world_size, host_cpus_, tunables().spin);
  int local_ranks = 0;
  for (auto& peer : peers_)
    if (peer->same_host) peer->local_index = local_ranks++;
  if (inbox_fd.fd >= 0) inbox_ = Fastbox::map_inbox(std::exchange(inbox_fd.fd, -1), local_ranks);
  try {
    handshake(connect_deadline);
    connect_fastboxes(connect_deadline);
  } catch (...) {
    remove_message_handlers();
    throw;
  }
  // Every peer has read our address: a peer sends its handshake message, which we now hold, only
  // after reading all of them. Left in place, the key would outlive the world in the job's store.
  try {
    store.erase(address_key(key_prefix, rank));
  } catch (const Error& e) {
    COHORT_LOG_WARN("could not erase rank {}'s transport address from the store: {}", rank,
                    e.what());
  }
  // Every rank had its verdict before it published its address, all of which this rank read.
  if (rank == 0) {
    try {
      forget_host_span(store, key_prefix);
    } catch (const Error& e) {
      COHORT_LOG_WARN("could not erase the world's host-span keys from the store: {}", e.what());
    }
  }
  COHORT_LOG_DEBUG(
      "{}: rank {} of {} connected (on CPUs {}; {} CPUs for {} ranks on this host; spin {} us{})",
      description(), rank, size, describe_cpus(own_cpus), host_cpus_, local_world_size,
      policy_.spin.count(), policy_.yield_while_spinning ? ", yielding" : "");
}

UcxHub::~UcxHub() {
  // Every view cancelled its own requests when it went; what is left is the handshake's, if any.
  // The owners kept for abandoned requests go last, after the lock (their deleters are the
  // application's), once the endpoints are closed and UCX has let go of their memory.
  std::vector<Retained> retained;
  std::lock_guard lock(mutex_);
  // Senders waiting for this rank's answer to an announcement get it: the ones in the rings or
  // taken from them and never received, and acks still waiting for room (for a bounded time,
  // yielding to the peers that must make it).
  if (!fastbox_peers_.empty()) {
    progress_fastboxes();
    for (Peer* peer : fastbox_peers_) drop_unexpected(*peer, [](Tag) { return true; });
    // Receives matched but not copied yet go with the rest (no other thread uses the hub now).
    withdraw_ready_copies([](const Pending&) { return true; });
    const auto acks_until = std::chrono::steady_clock::now() + kCancelTimeout;
    for (;;) {
      bool waiting = false;
      for (Peer* peer : fastbox_peers_) {
        flush_withdrawal(*peer);
        flush_acks(*peer);
        waiting =
            waiting || ((!peer->queued_acks.empty() || peer->withdrawal_queued) && !peer->failed);
      }
      if (!waiting || std::chrono::steady_clock::now() >= acks_until) break;
      sched_yield();
    }
  }
  requests_.for_each([this](const Request&, Pending& pending) {
    pending.request.cancel();
    note_abandoned(pending);
  });
  requests_.clear();
  // Flush endpoints to live peers (so eager data buffered in a TCP socket still leaves), release
  // those to failed peers without waiting for them, and those with a send abandoned in flight
  // by force after a flush (Peer::abandoned_send).
  std::vector<UcxEndpoint*> endpoints, abandoned;
  const std::unique_ptr<bool[]> force(new bool[peers_.size()]);
  for (std::size_t i = 0; i < peers_.size(); ++i) {
    endpoints.push_back(&peers_[i]->endpoint);
    force[i] = peers_[i]->failed || peers_[i]->abandoned_send;
    if (peers_[i]->abandoned_send && !peers_[i]->failed) abandoned.push_back(&peers_[i]->endpoint);
  }
  // A forced close drops what the transport still buffers: flush first what was sent to those
  // peers (eager messages whose sends completed), for half the time.
  const auto close_deadline = std::chrono::steady_clock::now() + kCloseTimeout;
  if (!abandoned.empty())
    UcxEndpoint::flush_all(worker_, abandoned,
                           std::chrono::steady_clock::now() + kCloseTimeout / 2);
  UcxEndpoint::close_all(worker_, endpoints, std::span<const bool>(force.get(), peers_.size()),
                         close_deadline);
  // Closed (by force where a send was abandoned), the endpoints took their requests with them.
  abandoned_.clear();
  retained.swap(retained_);
}

void UcxHub::handshake(Deadline deadline) {
  // A zero-byte message each way with every peer finishes UCX's lazy wireup now, while every
  // rank is alive and inside this constructor: UCX 1.13 aborts (wireup_ep.c assertion) when a
  // peer fails while an endpoint's wireup is still pending. The tag cannot collide with any op:
  // this worker is new and no op can be posted before the constructor returns.
  constexpr Tag kHandshakeTag = p2p_tag((1u << kCommBits) - 1, UINT32_MAX);
  std::vector<Request> requests;
  for (int p = 0; p < size_; ++p)
    requests.push_back(post_recv(p, nullptr, 0, kHandshakeTag, Origin{this, p}));
  for (int p = 0; p < size_; ++p)
    requests.push_back(post_send(p, nullptr, 0, kHandshakeTag, Origin{this, p}));
  try {
    wait(requests, deadline, "connecting the transport");
  } catch (...) {
    cancel_owned(this);
    throw;
  }
}

void UcxHub::on_endpoint_error(void* arg, ucp_ep_h, ucs_status_t status) noexcept {
  auto& peer = *static_cast<Peer*>(arg);
  if (peer.failed) return;
  peer.failed = true;
  peer.failure = std::string("UCX reported ") + ucs_status_string(status);
  COHORT_LOG_WARN("lost connection to world rank {}: {}", peer.rank, peer.failure);
}

void UcxHub::refuse_peer(int peer, const char* what) const {
  throw Error(ErrorCode::InvalidArgument, std::string(what) + ": peer rank " +
                                              std::to_string(peer) + " is out of range [0, " +
                                              std::to_string(size_) + ")");
}

void UcxHub::check_liveness() noexcept {
  for (auto& peer : peers_) {
    if (peer->failed || !peer->watch.watching() || peer->watch.alive()) continue;
    peer->failed = true;
    peer->failure = "its process exited";
    COHORT_LOG_WARN("world rank {} on this host exited", peer->rank);
  }
  last_liveness_check_ = std::chrono::steady_clock::now();
}

Request UcxHub::post_send(int peer, const void* data, std::size_t bytes, Tag tag, Origin origin) {
  check_peer(peer, "post_send");
  if (!data && bytes)
    throw Error(ErrorCode::InvalidArgument,
                "post_send: null buffer for " + std::to_string(bytes) + " bytes");
  std::lock_guard lock(mutex_);
  Peer& target = *peers_[static_cast<std::size_t>(peer)];
  if (counted_large(target, tag, bytes, true)) ++target.large_sends[tag];
  if (fastbox_send_route(target, tag, bytes) || behind_queued_fastbox_sends(target, tag))
    return post_fastbox_send(target, data, bytes, tag, origin);
  UcxRequest request = target.failed
                           ? UcxRequest::failed(UcxRequest::Kind::Send, UCS_ERR_CONNECTION_RESET)
                           : UcxRequest::send(worker_.get(), target.endpoint.get(), data, bytes,
                                              with_source(tag, static_cast<std::uint32_t>(rank_)));
  if (request.succeeded_at_post()) return Request::completed();
  return requests_.insert(Pending{peer, origin, bytes, tag, std::move(request), std::nullopt});
}

Request UcxHub::post_recv(int peer, void* data, std::size_t bytes, Tag tag, Origin origin) {
  check_peer(peer, "post_recv");
  if (!data && bytes)
    throw Error(ErrorCode::InvalidArgument,
                "post_recv: null buffer for " + std::to_string(bytes) + " bytes");
  const ReadyCopiesAfterUnlock copies(*this);  // its message's, if announced already
  std::lock_guard lock(mutex_);
  Peer& source = *peers_[static_cast<std::size_t>(peer)];
  if (fastbox_recv_route(source, tag, bytes))
    return post_fastbox_recv(source, data, bytes, tag, origin);
  if (counted_large(source, tag, bytes, false))
    return post_large_recv(source, data, bytes, tag, origin);
  UcxRequest request = UcxRequest::recv(worker_.get(), data, bytes,
                                        with_source(tag, static_cast<std::uint32_t>(peer)));
  return requests_.insert(Pending{peer, origin, bytes, tag, std::move(request), std::nullopt});
}

std::string UcxHub::describe(const Pending& pending) {
  const bool is_send = pending.request.kind() == UcxRequest::Kind::Send;
  std::string peer = std::to_string(pending.origin.peer_label);
  if (pending.origin.peer_label != pending.peer)
    peer += " (world rank " + std::to_string(pending.peer) + ")";
  const std::string where = (pending.tag & kP2PFlag) != 0
                                ? "tag " + std::to_string(tag_user(pending.tag))
                                : "seq " + std::to_string(tag_seq(pending.tag)) + " step " +
                                      std::to_string(tag_step(pending.tag));
  return std::string(is_send ? "send to rank " : "receive from rank ") + peer + " (" +
         std::to_string(pending.bytes) + " bytes, " + where + ")";
}

std::string UcxHub::pending_summary(std::span<const Request> requests) {
  std::string out;
  for (const Request& request : requests) {
    Pending* pending = requests_.find(request);
    if (!pending) continue;
    out += out.empty() ? "; still pending: " : ", ";
    out += describe(*pending);
  }
  return out;
}

bool UcxHub::poll_request(const Request& request, Pending& pending, const std::string& what,
                          std::span<const Request> all) {
  Peer& peer = *peers_[static_cast<std::size_t>(pending.peer)];
  // A receive whose rendezvous copy is still to be made, or runs in another thread, is in
  // progress. One that took a rendezvous message (copied, refused or failed) waits for its ack
  // to reach the ring back, unless the sender is gone: so a receiver that stops calling the
  // transport leaves no sender waiting.
  if (pending.copy != Copy::None || (pending.ack_queued && !peer.failed)) [[unlikely]]
    return false;
  // A fastbox receive whose message has not come, a send waiting for room in the ring, or a
  // rendezvous send waiting for its ack, is in progress like a UCX request; once matched, its
  // request is UcxRequest::completed.
  // A receive whose spread message is still arriving waits for its pieces (its message came
  // through the ring, so nothing for it waits in UCX).
  bool waiting_in_fastbox = pending.fastbox && !pending.fastbox->matched;
  if (waiting_in_fastbox && pending.request.kind() == UcxRequest::Kind::Recv &&
      !pending.fastbox->streaming) {
    // The sender may have sent more than the ring takes. Its message then waits in UCX; the
    // ring is looked at again first, as the message for this receive may have come meanwhile
    // (it would be in the ring before anything sent after it reaches UCX).
    if (const auto large = large_message_waiting(pending)) {
      progress_fastboxes();
      // Its own announcement may have come: the copy, not the poll below, ends the receive; or
      // its own spread message, whose last piece will.
      if (pending.copy != Copy::None || pending.fastbox->streaming) return false;
      if (!pending.fastbox->matched) {
        std::erase(peer.posted_recvs, request);
        pending.fastbox->matched = true;
        pending.fastbox->disagreement = message_of(*large);
      }
      waiting_in_fastbox = false;
    }
  }
  const ucs_status_t status = waiting_in_fastbox ? UCS_INPROGRESS : pending.request.poll();
  // A large receive leaves the ring's queue when it is done (a ring message that turned out to
  // be its own took it out already).
  if (pending.large && status != UCS_INPROGRESS && !pending.large->ring_message)
    std::erase(peer.posted_recvs, request);
  const bool ring_disagreement =
      (pending.fastbox && !pending.fastbox->disagreement.empty() && status != UCS_INPROGRESS) ||
      (pending.large && pending.large->ring_message);
  if (ring_disagreement) {
    const std::string description = describe(pending);
    const std::string received =
        pending.fastbox ? pending.fastbox->disagreement : message_of(*pending.large->ring_message);
    // A cancelled UCX receive stays UCX's until a later progress completes it: it is left in
    // the table then, and cancel_owned() takes it back.
    if (status != UCS_INPROGRESS) requests_.release(request);
    throw Error(ErrorCode::InvalidArgument,
                "sizes disagree: " + description + " got " + received + " from rank " +
                    std::to_string(pending.origin.peer_label) +
                    " (the ranks were called with different arguments)" + pending_summary(all),
                ErrorContext{.op = what, .peers = {pending.origin.peer_label}});
  }
  if (pending.fastbox && pending.fastbox->failure) [[unlikely]] {
    // A rendezvous copy failed (this rank's read, or the receiver's, as its ack said).
    const Error failure = *pending.fastbox->failure;
    const int label = pending.origin.peer_label;
    requests_.release(request);
    throw Error(failure.code(), failure.detail() + pending_summary(all),
                ErrorContext{.op = what, .peers = {label}});
  }
  if (status == UCS_INPROGRESS) {
    if (!peer.failed) return false;
    // Left in the table: UCX may still own it; cancel_all() takes it back.
    throw Error(ErrorCode::RemoteError,
                "rank " + std::to_string(pending.origin.peer_label) + " failed (" + peer.failure +
                    ")" + pending_summary(all),
                ErrorContext{.op = what, .peers = {pending.origin.peer_label}});
  }
  const std::size_t received = pending.request.received_bytes();
  const bool wrong_size = status == UCS_OK && pending.request.kind() == UcxRequest::Kind::Recv &&
                          received != pending.bytes;
  if (status == UCS_OK && !wrong_size) {
    requests_.release(request);
    return true;
  }
  // Only failures pay for formatting: this is the hot path of every small collective.
  const std::string description = describe(pending);
  requests_.release(request);
  // A failed transfer is most often a dead peer; look before blaming UCX so the error names it.
  if (!wrong_size) check_liveness();
  // cohort's algorithms agree on every message size whenever the ranks agree on the op, so a
  // size difference means the ranks (or a send and its receive) were given different arguments.
  if (wrong_size)
    throw Error(ErrorCode::InvalidArgument,
                "sizes disagree: " + description + " got a " + std::to_string(received) +
                    "-byte message from rank " + std::to_string(pending.origin.peer_label) +
                    " (the ranks were called with different arguments)" + pending_summary(all),
                ErrorContext{.op = what, .peers = {pending.origin.peer_label}});
  if (status == UCS_ERR_MESSAGE_TRUNCATED)
    throw Error(ErrorCode::InvalidArgument,
                "sizes disagree: " + description + " got a larger message from rank " +
                    std::to_string(pending.origin.peer_label) +
                    " (the ranks were called with different arguments; UCX: message truncated)" +
                    pending_summary(all),
                ErrorContext{.op = what, .peers = {pending.origin.peer_label}});
  if (peer.failed)
    throw Error(ErrorCode::RemoteError,
                description + " failed: rank " + std::to_string(pending.origin.peer_label) +
                    " failed (" + peer.failure + ")" + pending_summary(all),
                ErrorContext{.op = what, .peers = {pending.origin.peer_label}});
  const Error error = ucx_error(status, description);
  throw Error(error.code(), error.message() + pending_summary(all),
              ErrorContext{.op = what, .peers = {pending.origin.peer_label}});
}

void UcxHub::wait(std::span<const Request> requests, Deadline deadline, const std::string& what,
                  const Interruption* interruption) {
  {
    std::vector<std::shared_ptr<void>> reaped;  // dropped after the lock
    std::lock_guard lock(mutex_);
    if (abandoned_hint_.load(std::memory_order_relaxed)) [[unlikely]]
      reaped = reap_abandoned();
    for (const Request& request : requests)
      if (!request.is_completed() && !requests_.find(request))
        throw Error(ErrorCode::InvalidUsage,
                    "wait() on a stale or invalid request handle (slot " +
                        std::to_string(request.slot) + ", generation " +
                        std::to_string(request.generation) + ")",
                    ErrorContext{.op = what});
  }
  // Small op waits (the common case) track completion on the stack, not in a heap vector.
  constexpr std::size_t kInlineRequests = 16;
  std::array<bool, kInlineRequests> done_inline{};
  std::vector<bool> done_heap;
  if (requests.size() > kInlineRequests) done_heap.assign(requests.size(), false);
  auto is_done = [&](std::size_t i) {
    return requests.size() > kInlineRequests ? bool(done_heap[i]) : done_inline[i];
  };
  auto mark_done = [&](std::size_t i) {
    if (requests.size() > kInlineRequests) {
      done_heap[i] = true;
    } else {
      done_inline[i] = true;
    }
  };
  for (std::size_t i = 0; i < requests.size(); ++i)
    if (requests[i].is_completed()) mark_done(i);
  // Checked at entry, but another thread may cancel the owner's requests meanwhile (against
  // the contract that one thread drives a view): an error then, not a null dereference.
  const auto still_there = [&](const Request& request) -> Pending& {
    Pending* pending = requests_.find(request);
    if (pending == nullptr) [[unlikely]]
      throw Error(ErrorCode::InvalidUsage,
                  "wait(): a request it waits on was released meanwhile (cancelled from "
                  "another thread?)",
                  ErrorContext{.op = what});
    return *pending;
  };
  // Polls the requests not done yet (under the lock); true when none is left.
  const auto poll_all = [&] {
    bool all_done = true;
    for (std::size_t i = 0; i < requests.size(); ++i) {
      if (is_done(i)) continue;
      if (poll_request(requests[i], still_there(requests[i]), what, requests)) {
        mark_done(i);
      } else {
        all_done = false;
      }
    }
    return all_done;
  };
  const auto start = std::chrono::steady_clock::now();
  const auto spin_until = start + policy_.spin;
  const auto yield_until = start + kYieldPhase;
  // After every poll where ranks outnumber hardware threads, and once the spin budget is spent
  // (wait_policy.hpp): the rank this one waits for may need this core to make its progress.
  bool yielding = policy_.yield_while_spinning;
  for (std::uint32_t round = 1;; ++round) {
    std::uint64_t epoch = 0;
    // Before the interruption's check below: a wake-up asked after it makes the sleep return.
    const std::uint64_t wake_calls = wake_calls_.load();
    bool all_done = true;
    {
      // Copies the round accepted, this wait's or others', are made right after it.
      const ReadyCopiesAfterUnlock copies(*this);
      // One round under the lock: the requests of other communicators (and threads) advance too.
      std::lock_guard lock(mutex_);
      progress_locked();
      all_done = poll_all();
      epoch = progress_epoch_;
    }
    if (all_done) return;
    // After the round, so an op whose messages all arrived completes rather than fails. Outside
    // the lock: the side work posts and tests requests of its own.
    if (interruption != nullptr) interruption->check(what, WaitKind::DrivesTransport);
    // Reading the clock costs about as much as a progress call; spin a few rounds between reads.
    // A round that yields reads it every time: a yield may hand the core away for a timeslice.
    // (Yielding only at every 16th round left an oversubscribed rank spinning 15 rounds on the
    // core its peer needed: on 2026-11-29 a 3-rank 8 B sendrecv on 2 vCPUs took 2.2-4.0 us
    // against Open MPI's 1.4-2.0, which yields after every poll; bench/PERFORMANCE-LOG.md.)
    constexpr std::uint32_t kRoundsPerClockRead = 16;
    if (!yielding && round % kRoundsPerClockRead != 0) continue;
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) {
      const ReadyCopiesAfterUnlock copies(*this);
      std::lock_guard lock(mutex_);
      check_liveness();
      // A peer found dead just now explains the silence better than the timeout does; and
      // requests that completed in this last look were released: not a timeout then.
      if (poll_all()) return;
      throw Error(ErrorCode::Timeout, "deadline passed" + pending_summary(requests),
                  ErrorContext{.op = what});
    }
    if (now < spin_until) {
      if (yielding) sched_yield();
      continue;
    }
    yielding = true;
    if (now < yield_until) {
      sched_yield();
      continue;
    }
    block_until(deadline, epoch, wake_calls);
  }
}

void UcxHub::wake_sleepers() noexcept {
  wake_calls_.fetch_add(1);  // first (sleepers.hpp): a thread not yet counted asleep sees it
  sleepers_.wake_all();
}

void UcxHub::progress_locked() noexcept {
  // Both, always: a doorbell (an empty active message) makes worker progress, a fastbox message
  // does not.
  const bool worker_moved = worker_.progress();
  const bool fastbox_moved = !fastbox_peers_.empty() && progress_fastboxes();
  note_progress(worker_moved || fastbox_moved);
}

void UcxHub::note_progress(bool moved) noexcept {
  if (!moved) return;
  ++progress_epoch_;
  // A sleeping thread's requests may be among those just completed; it would not learn of it
  // from the worker's event fd (the events were consumed here), so wake it.
  if (sleepers_.any()) sleepers_.wake_all();
}

void UcxHub::block_until(Deadline until, std::uint64_t seen_epoch, std::uint64_t seen_wake_calls) {
  const testing::SleepHooks hooks = current_sleep_hooks();
  const int bell = hooks.refuse_eventfds ? -1 : Sleepers::own_drained_fd();
  // Counted asleep from before the last looks below until after the sleep (sleepers.hpp).
  struct Counted {
    Sleepers& sleepers;
    int fd = -1;
    ~Counted() {
      if (fd >= 0) sleepers.remove(fd);
    }
  } counted{sleepers_};
  std::vector<pollfd> fds;
  fds.reserve(2 + peers_.size());  // nothing below allocates once the inbox says we sleep
  bool polling_for_room = false;
  bool bell_rings = false;  // registered: a wake-up writes to `bell`; otherwise nap briefly
  {
    std::lock_guard lock(mutex_);
    if (bell >= 0) {
      try {
        sleepers_.add(bell);
        counted.fd = bell;
        bell_rings = true;
      } catch (const std::bad_alloc&) {
      }
    }
    // Another thread progressed since this one looked: its requests may be done; look again.
    if (progress_epoch_ != seen_epoch) return;
    // Woken since the round began (side work queued, an abort): look again.
    if (wake_calls_.load() != seen_wake_calls) return;
    // Counted as asleep before the last look at the rings: a peer that stamps a message after
    // that look sees the count and rings the doorbell, which the worker's event fd reports.
    if (inbox_) {
      inbox_.set_sleeping(true);
      if (fastbox_has_incoming()) {
        inbox_.set_sleeping(false);
        return;
      }
    }
    // A send, ack or Withdrawal waiting for room in a peer's ring: that peer is asked to ring
    // the doorbell once it has made the room (before arm(), which then reports a doorbell
    // rung meanwhile); when the room is there already, look again instead of sleeping.
    for (Peer* peer : fastbox_peers_) {
      if (peer->failed ||
          (peer->queued_sends.empty() && peer->queued_acks.empty() && !peer->withdrawal_queued))
        continue;
      switch (peer->to_peer.want_room()) {
        case Fastbox::Sender::RoomRequest::Fits:
          if (inbox_) inbox_.set_sleeping(false);
          return;
        case Fastbox::Sender::RoomRequest::Asked: break;
        case Fastbox::Sender::RoomRequest::NotAsked: polling_for_room = true; break;
      }
    }
    if (!worker_.arm()) {  // events pending: progress instead of sleeping
      if (inbox_) inbox_.set_sleeping(false);
      return;
    }
    fds.push_back({worker_.event_fd(), POLLIN, 0});
    if (bell_rings) fds.push_back({bell, POLLIN, 0});
    for (const auto& peer : peers_)
      if (!peer->failed && peer->watch.fd() >= 0) fds.push_back({peer->watch.fd(), POLLIN, 0});
  }
  const std::chrono::milliseconds longest = polling_for_room || !bell_rings ? kRoomPoll
                                            : hooks.longest_nap.count() > 0 ? hooks.longest_nap
                                                                            : kMaxBlock;
  const auto left =
      std::chrono::ceil<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
  const int timeout_ms =
      static_cast<int>(std::clamp(left, std::chrono::milliseconds(0), longest).count());
  if (hooks.before_poll != nullptr) hooks.before_poll();
  if (poll(fds.data(), fds.size(), timeout_ms) < 0 && errno != EINTR)
    COHORT_LOG_WARN("poll on the UCX event fd failed (errno {})", errno);
  {
    std::lock_guard lock(mutex_);
    if (inbox_) inbox_.set_sleeping(false);
    check_liveness();
  }
  if (hooks.after_sleep != nullptr) hooks.after_sleep();
}

bool UcxHub::test(const Request& request) {
  if (request.is_completed()) return true;
  const ReadyCopiesAfterUnlock copies(*this);
  std::lock_guard lock(mutex_);
  Pending* pending = requests_.find(request);
  if (!pending)
    throw Error(ErrorCode::InvalidUsage, "test() on a stale or invalid request handle (slot " +
                                             std::to_string(request.slot) + ", generation " +
                                             std::to_string(request.generation) + ")");
  static const std::string kWhat = "test";  // built once: this is every small receive's poll
  // The rings first: when they complete a fastbox request (its message came, or its queued
  // message went in), this round skips the worker's progress and UCX's probe for a large
  // message, which together were most of a small receive's last round. While it still waits,
  // only every kRingRoundsPerFullRound-th test of it makes them (and looks for a dead peer), so
  // a message that lands in the ring meanwhile is seen sooner. UCX's own messages then wait a
  // few rounds, well under a microsecond. A queued send too large for the ring is matched once
  // its turn came and it went to UCX: that one needs the worker's progress, so only a test that
  // finds the request complete returns early.
  if (pending->fastbox && !fastbox_peers_.empty()) {
    FastboxPart& part = *pending->fastbox;
    if (!part.matched) note_progress(progress_fastboxes());
    if (part.matched) {
      if (poll_request(request, *pending, kWhat, std::span<const Request>(&request, 1)))
        return true;
    } else if (++part.ring_only_rounds % kRingRoundsPerFullRound != 0) {
      return false;
    }
  }
  progress_locked();
  if (coarse_now() - last_liveness_check_ >= kLivenessInterval) check_liveness();
  return poll_request(request, *pending, kWhat, std::span<const Request>(&request, 1));
}

bool UcxHub::note_abandoned(Pending& pending) noexcept {
  if (pending.request.poll() != UCS_INPROGRESS) return false;
  if (pending.peer >= 0 && pending.peer < size_)
    peers_[static_cast<std::size_t>(pending.peer)]->abandoned_send = true;
  return true;
}

void UcxHub::cancel_owned(const void* owner) noexcept {
  const ReadyCopiesAfterUnlock copies(*this);  // other communicators' receives may match
  std::unique_lock lock(mutex_);
  forget_fastbox_requests(owner);
  const auto owned = [owner](const Pending& pending) { return pending.origin.owner == owner; };
  // A copy another thread makes now writes into the receive's buffer until it ends: the
  // receive is released only after (a copy ends on its own; it waits for nothing).
  for (;;) {
    bool running = false;
    requests_.for_each([&](const Request&, Pending& pending) {
      running = running || (owned(pending) && pending.copy == Copy::Running);
    });
    if (!running) break;
    lock.unlock();
    sched_yield();
    lock.lock();
  }
  // Again: the owner's thread may have posted while the lock was let go.
  forget_fastbox_requests(owner);
  withdraw_ready_copies(owned);
  requests_.for_each([owner](const Request&, Pending& pending) {
    if (pending.origin.owner == owner) pending.request.cancel();
  });
  // Cancelled receives complete during progress; give them a bounded moment, then free whatever
  // is left (UCX releases those requests when they finish).
  const auto deadline = std::chrono::steady_clock::now() + kCancelTimeout;
  for (;;) {
    progress_locked();
    bool any_pending = false;
    requests_.for_each([&](const Request&, Pending& pending) {
      if (pending.origin.owner == owner && pending.request.kind() == UcxRequest::Kind::Recv &&
          pending.request.poll() == UCS_INPROGRESS)
        any_pending = true;
    });
    if (!any_pending || std::chrono::steady_clock::now() >= deadline) break;
  }
  std::size_t released = 0, kept = 0;
  requests_.for_each([&](const Request& request, Pending& pending) {
    if (pending.origin.owner != owner) return;
    if (note_abandoned(pending)) {
      // UCX goes on with it whether or not it is freed: keep it, so that the memory's owners
      // (retain_until_quiet) are let go only once it ended.
      try {
        reserve_one_more(abandoned_);  // then the push cannot throw
        abandoned_.push_back(Abandoned{std::move(pending.request), tag_comm(pending.tag)});
        ++kept;
      } catch (const std::bad_alloc&) {
        COHORT_LOG_ERROR(
            "out of memory keeping a cancelled request UCX still has; its buffer "
            "may be touched after the op's owners let go of it");
      }
    }
    requests_.release(request);
    ++released;
  });
  abandoned_hint_.store(!abandoned_.empty(), std::memory_order_relaxed);
  if (released > 0)
    COHORT_LOG_DEBUG("cancel: released {} requests, {} of them still in flight at UCX", released,
                     kept);
}

void UcxHub::retain_until_quiet(std::uint32_t tag_id, std::shared_ptr<void> keep) noexcept {
  if (!keep) return;
  std::vector<std::shared_ptr<void>> dropped;  // declared first: dropped after the lock
  std::lock_guard lock(mutex_);
  dropped = reap_abandoned();
  const bool in_flight = std::any_of(abandoned_.begin(), abandoned_.end(),
                                     [tag_id](const Abandoned& a) { return a.tag_id == tag_id; });
  if (!in_flight) return;  // `keep` goes with the caller's argument
  try {
    retained_.push_back(Retained{tag_id, std::move(keep)});
  } catch (const std::bad_alloc&) {
    COHORT_LOG_ERROR(
        "out of memory keeping the buffers of a failed op; UCX may touch them after "
        "they are freed");
  }
}

std::vector<std::shared_ptr<void>> UcxHub::reap_abandoned() noexcept {
  std::erase_if(abandoned_, [](Abandoned& a) { return a.request.poll() != UCS_INPROGRESS; });
  abandoned_hint_.store(!abandoned_.empty(), std::memory_order_relaxed);
  std::vector<std::shared_ptr<void>> released;
  std::erase_if(retained_, [&](Retained& r) {
    const bool waiting = std::any_of(abandoned_.begin(), abandoned_.end(),
                                     [&r](const Abandoned& a) { return a.tag_id == r.tag_id; });
    if (waiting) return false;
    try {
      released.push_back(std::move(r.keep));
    } catch (const std::bad_alloc&) {
      // Out of memory moving it out: dropped here, under the lock.
    }
    return true;
  });
  return released;
}

void UcxHub::forget_tag_id(std::uint32_t id) noexcept {
  const ReadyCopiesAfterUnlock copies(*this);  // other communicators' receives may match
  std::lock_guard lock(mutex_);
  // Messages already in the rings are taken first, so their announcements are answered below.
  if (!fastbox_peers_.empty()) note_progress(progress_fastboxes());
  const auto of_id = [id](Tag tag) { return tag_comm(tag) == id; };
  for (Peer* peer : fastbox_peers_) {
    std::erase_if(peer->large_sends, [&](const auto& count) { return of_id(count.first); });
    std::erase_if(peer->large_recvs, [&](const auto& count) { return of_id(count.first); });
    drop_unexpected(*peer, of_id);
  }
  drain_unexpected_ucx(id);
}

void UcxHub::drain_unexpected_ucx(std::uint32_t id) noexcept {
  // Messages a peer sent for a receive never posted (an op that failed, a send nobody
  // received) wait in UCX's unexpected queue for as long as the worker lives, and would match
  // the first receive of a communicator given this id later. Each is received into no memory at
  // all: UCX completes a receive shorter than its message as truncated and drops the rest (an
  // eager message's fragments as they come; a rendezvous is answered without fetching its data,
  // so its sender completes too). Receiving each into memory of its own size, as this did
  // before, allocated and filled a whole 1 GiB buffer for a 1 GiB message nobody wanted.
  const ucp_tag_t comm_mask = ((ucp_tag_t{1} << kCommBits) - 1) << 52;
  const ucp_tag_t of_id = op_tag(id, 0, 0) & comm_mask;
  progress_locked();  // what already arrived is matched against the queue first
  for (;;) {
    try {
      reserve_one_more(abandoned_);  // room first, so that a receive in progress is kept
    } catch (const std::bad_alloc&) {
      COHORT_LOG_ERROR("out of memory draining the messages of a destroyed communicator");
      return;
    }
    ucp_tag_recv_info_t info{};
    ucp_tag_message_h message = ucp_tag_probe_nb(worker_.get(), of_id, comm_mask, 1, &info);
    if (message == nullptr) return;
    UcxRequest request = UcxRequest::recv_message(worker_.get(), nullptr, 0, message);
    if (request.poll() != UCS_INPROGRESS) continue;
    abandoned_.push_back(Abandoned{std::move(request), id});  // reserved above: no throw
    abandoned_hint_.store(true, std::memory_order_relaxed);
  }
}

std::string UcxHub::description() const {
  return worker_.context().description();
}

namespace testing {

void set_sleep_hooks(const SleepHooks& hooks) noexcept {
  std::lock_guard lock(sleep_hooks_mutex);
  sleep_hooks = hooks;
  sleep_hooks_set.store(true, std::memory_order_release);
}

}  // namespace testing

}  // namespace cohort::transport::ucx
