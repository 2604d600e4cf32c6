// UcxHub's fastboxes: small point-to-point messages between same-host peers through shared
// memory, middle-sized ones spread over several slots, and large ones by rendezvous (see
// ucx_hub.hpp and transport/fastbox.hpp). Everything here
// runs under the hub's mutex, except connect_fastboxes (constructor) and run_ready_copies, which
// takes it itself and lets go of it for each copy.

#include "transport/ucx/ucx_hub.hpp"

#include <cohort/error.hpp>

#include "core/log.hpp"
#include "core/memory_fence.hpp"
#include "transport/process_memory.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <span>

namespace cohort::transport::ucx {
namespace {

/// The steady clock (CLOCK_MONOTONIC, one for every process of a host) in ns: when a middle-sized
/// send or receive was posted, for the route choice (ring_route_choice.hpp).
std::uint64_t now_ns() noexcept {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::steady_clock::now().time_since_epoch())
                                        .count());
}

/// Whether a ring whose `slots` slots were used so far has been round once, so the spread
/// message that starts there writes or reads no slot for the first time. Only those are timed:
/// a process's first touch of each of the ring's pages faults it into its mapping, which made
/// the first 64 KiB messages' copies 24-36 us against 12-16 for the 128 KiB ones after them.
bool ring_lapped(std::uint64_t slots) noexcept {
  return slots >= Fastbox::kDepth;
}

/// The active message that wakes a peer asleep on its worker's event fd. Its handler does
/// nothing: the wake-up itself is the point, and the message it announces is in the ring.
constexpr unsigned kDoorbellId = 0;

ucs_status_t on_doorbell(void*, const void*, std::size_t, void*, std::size_t,
                         const ucp_am_recv_param_t*) noexcept {
  return UCS_OK;
}

/// The active message that carries an ack when the ring back is taken (see acknowledge()).
constexpr unsigned kAckId = 1;
/// Its header: the ack and who sends it.
struct AckWire {
  std::int32_t rank;  ///< the acknowledging rank (world)
  std::int32_t error;
  std::uint64_t cookie;
};

/// The active message that withdraws a spread message whose Withdrawal piece finds no room in
/// the ring (see forget_fastbox_requests()).
constexpr unsigned kWithdrawalId = 2;
struct WithdrawalWire {
  std::int32_t rank;  ///< the withdrawing rank (world)
  std::uint32_t unused;
  std::uint64_t end;  ///< Peer::withdrawn_at
};

/// testing::refuse_immediate_messages.
std::atomic<bool> refusing_immediate_messages{false};
/// testing::slow_receive_timings's additions, per route (Spread, Rendezvous), in ns.
std::atomic<std::uint64_t> receive_timing_additions[2]{};

/// Sends `header` to `endpoint` as active message `id` at once, or not at all (false): the
/// header lives on the caller's stack, and a request left pending would wait for this rank's
/// progress, which is what the callers avoid.
bool send_at_once(ucp_ep_h endpoint, unsigned id, const void* header,
                  std::size_t header_length) noexcept {
  if (refusing_immediate_messages.load(std::memory_order_relaxed)) [[unlikely]]
    return false;
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS | UCP_OP_ATTR_FLAG_FORCE_IMM_CMPL;
  param.flags = UCP_AM_SEND_FLAG_EAGER;
  const ucs_status_ptr_t result =
      ucp_am_send_nbx(endpoint, id, header, header_length, nullptr, 0, &param);
  // UCX returns no request under FORCE_IMM_CMPL; one would read `header` after it is gone.
  COHORT_CHECK(!UCS_PTR_IS_PTR(result));
  return result == nullptr;
}

}  // namespace

void UcxHub::connect_fastboxes(Deadline deadline) {
  std::vector<Peer*> local;
  for (auto& peer : peers_)
    if (peer->same_host && peer->rank != rank_) local.push_back(peer.get());
  if (local.empty()) return;

  ucp_am_handler_param_t doorbell{};
  doorbell.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB;
  doorbell.id = kDoorbellId;
  doorbell.cb = &on_doorbell;
  ucp_am_handler_param_t ack{};
  ack.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
                   UCP_AM_HANDLER_PARAM_FIELD_ARG;
  ack.id = kAckId;
  ack.cb = &UcxHub::on_ack_message;
  ack.arg = this;
  ucp_am_handler_param_t withdrawal = ack;
  withdrawal.id = kWithdrawalId;
  withdrawal.cb = &UcxHub::on_withdrawal_message;
  for (const ucp_am_handler_param_t* handler : {&doorbell, &ack, &withdrawal}) {
    if (const ucs_status_t status = ucp_worker_set_am_recv_handler(worker_.get(), handler);
        status != UCS_OK) {
      COHORT_LOG_WARN("fastboxes off: registering an active-message handler failed ({})",
                      ucs_status_string(status));
      inbox_ = Fastbox();  // peers learn below that this rank reads no inbox
      break;
    }
  }

  // Every peer sized its inbox before its handshake message, which this rank has received, so
  // each segment is complete when it is mapped here. What each side can do, told to the other:
  // bit 0, it mapped the other's inbox (it can write there); bit 1, it reads its own inbox;
  // bit 2, it can read the other's memory (large messages may go by rendezvous).
  const int local_ranks = static_cast<int>(local.size()) + 1;
  struct Agreement {
    std::uint64_t flags = 0;
    std::uint64_t rendezvous_above = kNoRendezvous;  ///< this rank's rendezvous_limit()
  };
  std::vector<Agreement> mine(local.size()), theirs(local.size());
  for (std::size_t i = 0; i < local.size(); ++i) {
    Peer& peer = *local[i];
    if (tunables().shared_memory && inbox_ && peer.fastbox_fd >= 0)
      peer.peer_inbox = Fastbox::map_peer_inbox(peer.pid, peer.fastbox_fd, local_ranks);
    mine[i] = {static_cast<std::uint64_t>((peer.peer_inbox ? 1 : 0) | (inbox_ ? 2 : 0) |
                                          (peer.readable ? 4 : 0)),
               rendezvous_limit()};
  }
  constexpr Tag kAgreementTag = p2p_tag((1u << kCommBits) - 1, UINT32_MAX - 1);
  std::vector<Request> requests;
  for (std::size_t i = 0; i < local.size(); ++i)
    requests.push_back(
        post_recv(local[i]->rank, &theirs[i], sizeof(Agreement), kAgreementTag, Origin{this, 0}));
  for (std::size_t i = 0; i < local.size(); ++i)
    requests.push_back(
        post_send(local[i]->rank, &mine[i], sizeof(Agreement), kAgreementTag, Origin{this, 0}));
  try {
    wait(requests, deadline, "connecting the transport (fastboxes)");
  } catch (...) {
    cancel_owned(this);
    throw;
  }

  const int my_index = peers_[static_cast<std::size_t>(rank_)]->local_index;
  std::lock_guard lock(mutex_);
  for (std::size_t i = 0; i < local.size(); ++i) {
    Peer& peer = *local[i];
    const std::uint64_t my_flags = mine[i].flags, their_flags = theirs[i].flags;
    const bool to_peer = (my_flags & 1) != 0 && (their_flags & 2) != 0;
    const bool from_peer = (their_flags & 1) != 0 && (my_flags & 2) != 0;
    if (to_peer) {
      peer.to_peer = peer.peer_inbox.sender(my_index);
    } else {
      peer.peer_inbox = Fastbox();
    }
    if (from_peer) peer.from_peer = inbox_.receiver(peer.local_index);
    if (to_peer || from_peer) fastbox_peers_.push_back(&peer);
    // Acks go back through the other ring, and each side reads the other's memory.
    // The larger threshold of the two, so both ranks of the pair use the same one.
    if (to_peer && from_peer && (my_flags & 4) != 0 && (their_flags & 4) != 0)
      peer.rendezvous_above = std::max(mine[i].rendezvous_above, theirs[i].rendezvous_above);
    COHORT_LOG_DEBUG(
        "fastbox with world rank {}: {}{}", peer.rank,
        to_peer && from_peer ? "both ways"
        : to_peer            ? "sending only"
        : from_peer          ? "receiving only"
                             : "off (UCX)",
        peer.rendezvous_above != kNoRendezvous ? ", large messages by rendezvous" : "");
  }
}

Request UcxHub::post_fastbox_send(Peer& peer, const void* data, std::size_t bytes, Tag tag,
                                  Origin origin) {
  // Stamped now, in posting order, even if the message waits for room: a large send posted
  // after it is counted already, but goes out after it.
  const std::uint32_t large_before = count_of(peer.large_sends, tag);
  // Behind queued sends if there are any: the ring keeps send order. A message in the ring is
  // sent: its buffer is the caller's again.
  const bool ring_free = !ring_taken(peer);
  if (ring_free && bytes <= Fastbox::kInlineBytes &&
      write_fastbox(peer, {tag, bytes, large_before}, data))
    return Request::completed();
  const int size_class = measured_class(peer, bytes);
  const bool spread = by_spread(bytes) && spread_this(peer, size_class);
  const bool rendezvous = !spread && bytes > peer.rendezvous_above;
  FastboxPart part{.send_data = data,
                   .large_before = large_before,
                   .spread = spread,
                   .rendezvous = rendezvous,
                   // Stamped for the peer's timings only while the class is on trial.
                   .posted_at = size_class >= 0 && !peer.routes.settled(size_class) ? now_ns() : 0};
  // A spread message's first pieces go now; the rest follow as the receiver frees slots.
  if (ring_free && spread) {
    delivered(peer, peer.to_peer.try_send_spread(
                        {tag, bytes, large_before, Fastbox::Kind::Spread, part.posted_at}, data,
                        part.spread_done));
    if (part.spread_done == bytes) return Request::completed();
  }
  // A rendezvous send is sealed now (progress, which may announce it later, cannot throw).
  if (rendezvous) part.seal = SendSeal::make();
  const bool pieces_in_ring = part.spread_done > 0;
  Request handle;
  try {
    handle = requests_.emplace(Pending{peer.rank, origin, bytes, tag,
                                       UcxRequest::completed(UcxRequest::Kind::Send, 0),
                                       std::move(part)});
  } catch (...) {
    // Out of memory with a spread message's first pieces in the ring: it ends there, as a
    // cancelled one does, before anything else can follow them.
    if (pieces_in_ring && !send_withdrawal_message(peer)) peer.withdrawal_queued = true;
    throw;
  }
  // A rendezvous send is announced now if it can be, and completes with the receiver's ack.
  if (!(ring_free && rendezvous && write_rendezvous(peer, handle, *requests_.find(handle))))
    peer.queued_sends.push_back(handle);
  return handle;
}

Request UcxHub::post_fastbox_recv(Peer& peer, void* data, std::size_t bytes, Tag tag,
                                  Origin origin) {
  const std::uint32_t large_before = count_of(peer.large_recvs, tag);
  // Braced, not emplace's parentheses: clang before 16 cannot build an aggregate from them.
  const Request handle = requests_.emplace(
      Pending{peer.rank, origin, bytes, tag, UcxRequest::completed(UcxRequest::Kind::Recv, 0),
              FastboxPart{.recv_data = data,
                          .large_before = large_before,
                          .posted_at = times_receive(peer, bytes) ? now_ns() : 0}});
  Pending& recv = *requests_.find(handle);
  // A message with this tag already taken from the ring is older than any still in it. (No
  // receive with this tag is queued then: it would have taken that message.)
  const auto taken = oldest_unexpected(peer, tag);
  if (taken != peer.unexpected.end()) {
    const bool take = accept(recv, taken->bytes, taken->large_before);
    if (taken->withdrawn) {
      fail_withdrawn(recv);
    } else if (taken->rendezvous) {
      settle_rendezvous(peer, handle, recv, take, *taken->rendezvous);
    } else if (!taken->whole()) {
      // A spread message still arriving (the peer's newest unexpected one): what came goes to
      // the receive, and the rest will go straight there.
      if (take) {
        std::memcpy(data, taken->data.data(), taken->arrived);
        peer.incoming->receive = handle;
        recv.fastbox->matched = false;
        recv.fastbox->streaming = true;
      }
      peer.incoming->to_unexpected = false;
    } else if (take) {
      std::memcpy(data, taken->data.data(), bytes);
    }
    peer.unexpected.erase(taken);
  } else {
    peer.posted_recvs.push_back(handle);
  }
  return handle;
}

Request UcxHub::post_large_recv(Peer& peer, void* data, std::size_t bytes, Tag tag, Origin origin) {
  const std::uint32_t index = peer.large_recvs[tag]++;
  // The oldest message with this tag taken from the ring (the smallest stamp among them): if
  // this receive is not one of the large receives before it, it is that message's receive.
  const auto taken = oldest_unexpected(peer, tag);
  if (taken != peer.unexpected.end() && at_or_after(index, taken->large_before)) {
    const Request handle = requests_.insert(
        Pending{peer.rank, origin, bytes, tag, UcxRequest::completed(UcxRequest::Kind::Recv, 0),
                std::nullopt, LargeRecv{index, taken->bytes}});
    if (taken->rendezvous) acknowledge(peer, taken->rendezvous->cookie, 0, handle);
    if (!taken->whole()) drop_incoming(peer);
    peer.unexpected.erase(taken);
    return handle;
  }
  UcxRequest request = UcxRequest::recv(worker_.get(), data, bytes,
                                        with_source(tag, static_cast<std::uint32_t>(peer.rank)));
  const Request handle = requests_.insert(
      Pending{peer.rank, origin, bytes, tag, std::move(request), std::nullopt, LargeRecv{index}});
  peer.posted_recvs.push_back(handle);
  return handle;
}

std::optional<std::size_t> UcxHub::large_message_waiting(const Pending& recv) noexcept {
  ucp_tag_recv_info_t info{};
  const ucp_tag_message_h message =
      ucp_tag_probe_nb(worker_.get(), with_source(recv.tag, static_cast<std::uint32_t>(recv.peer)),
                       ~ucp_tag_t{0}, 0, &info);
  if (message == nullptr) return std::nullopt;
  return info.length;
}

bool UcxHub::write_fastbox(Peer& peer, const Fastbox::Message& message, const void* data) {
  return delivered(peer, peer.to_peer.try_send(message, data));
}

bool UcxHub::write_spread(Peer& peer, Pending& send) {
  FastboxPart& part = *send.fastbox;
  delivered(peer, peer.to_peer.try_send_spread({send.tag, send.bytes, part.large_before,
                                                Fastbox::Kind::Spread, part.posted_at},
                                               part.send_data, part.spread_done));
  return part.spread_done == send.bytes;
}

bool UcxHub::spread_this(Peer& peer, int c) noexcept {
  if (c < 0) return true;
  RingRouteChoice& routes = peer.routes;
  if (!routes.settled(c)) {
    if (const auto theirs = peer.to_peer.receiver_timings(c);
        theirs && routes.decide(c, {theirs->first, theirs->second})) {
      // Two lines, not one formatted here: this function may not throw.
      const char* verdict =
          routes.next(c) == RingRouteChoice::Route::Spread ? "spread" : "rendezvous";
      const auto low = (RingRouteChoice::kSmallest << c) / 1024;
      COHORT_LOG_DEBUG(
          "point-to-point messages of {}-{} KiB to world rank {}: {} (its receives took {:.1f} us "
          "spread, {:.1f} us by rendezvous; medians of {})",
          low, 2 * low, peer.rank, verdict, theirs->first / 1e3, theirs->second / 1e3,
          RingRouteChoice::kTrials);
      if (const auto mine = routes.own_timings(c))
        COHORT_LOG_DEBUG(
            "  counted with this rank's receives of them from world rank {}: {:.1f} "
            "us spread, {:.1f} us by rendezvous",
            peer.rank, mine->spread / 1e3, mine->rendezvous / 1e3);
    }
  }
  return routes.next(c) == RingRouteChoice::Route::Spread;
}

void UcxHub::note_received(Peer& peer, std::size_t bytes, RingRouteChoice::Route route,
                           std::uint64_t sent_at, std::uint64_t posted_at) noexcept {
  const int c = measured_class(peer, bytes);
  const std::uint64_t start = std::max(sent_at, posted_at);
  const std::uint64_t now = now_ns();
  // A send stamped by a clock ahead of this one (another time namespace) is not timed.
  if (c < 0 || sent_at == 0 || posted_at == 0 || now < start) return;
  const std::uint64_t ns =
      now - start +
      receive_timing_additions[static_cast<std::size_t>(route)].load(std::memory_order_relaxed);
  if (const auto medians = peer.routes.received(c, route, ns))
    peer.from_peer.publish_timings(c, medians->spread, medians->rendezvous);
}

bool UcxHub::flush_withdrawal(Peer& peer) noexcept {
  if (!peer.withdrawal_queued) return true;
  if (!delivered(peer, peer.to_peer.try_send_withdrawal())) return false;
  peer.withdrawal_queued = false;
  return true;
}

void UcxHub::fail_withdrawn(Pending& recv) noexcept {
  try {
    recv.fastbox->failure = std::make_unique<Error>(
        ErrorCode::RemoteError,
        describe(recv) + ": rank " + std::to_string(recv.origin.peer_label) +
            " cancelled the send (its communicator was destroyed or aborted) before all of it "
            "arrived");
  } catch (...) {
    recv.request = UcxRequest::failed(UcxRequest::Kind::Recv, UCS_ERR_NO_MEMORY);
  }
  recv.fastbox->streaming = false;
  recv.fastbox->matched = true;
}

bool UcxHub::continue_incoming(Peer& peer) noexcept {
  Incoming& incoming = *peer.incoming;
  std::byte* into = nullptr;
  Pending* recv = incoming.receive.valid() ? requests_.find(incoming.receive) : nullptr;
  if (recv != nullptr) {
    into = static_cast<std::byte*>(recv->fastbox->recv_data);
  } else if (incoming.to_unexpected) {
    into = peer.unexpected.back().data.data();
  }
  const std::uint64_t before = incoming.done;
  const Fastbox::Receiver::Taken taken = peer.from_peer.take_spread(
      incoming.bytes, into, incoming.done,
      peer.withdrawn_at.empty() ? UINT64_MAX : peer.withdrawn_at.front());
  if (taken.sent_at != 0) incoming.sent_at = taken.sent_at;
  incoming.done = taken.done;
  // An end reached is used up (not one of a later message, when a Withdrawal piece ended it).
  while (!peer.withdrawn_at.empty() && peer.withdrawn_at.front() <= peer.from_peer.taken())
    peer.withdrawn_at.pop_front();
  if (taken.withdrawn) {
    // Its sender was cancelled after sending part of it: its receive fails, now or when it
    // is posted.
    if (recv != nullptr) {
      fail_withdrawn(*recv);
    } else if (incoming.to_unexpected) {
      peer.unexpected.back().withdrawn = true;
    }
    peer.incoming.reset();
    return true;
  }
  if (incoming.to_unexpected) peer.unexpected.back().arrived = incoming.done;
  const bool moved = incoming.done != before;
  if (incoming.done == incoming.bytes) {
    if (recv != nullptr) {
      // accept() made its request complete already; it ends now that its bytes are in.
      recv->fastbox->streaming = false;
      recv->fastbox->matched = true;
      if (incoming.timed)
        note_received(peer, incoming.bytes, RingRouteChoice::Route::Spread, incoming.sent_at,
                      recv->fastbox->posted_at);
    }
    peer.incoming.reset();
  }
  return moved;
}

bool UcxHub::delivered(Peer& peer, Fastbox::Sender::Outcome outcome) noexcept {
  switch (outcome) {
    case Fastbox::Sender::Outcome::Full: return false;
    case Fastbox::Sender::Outcome::SentToSleeper: ring_doorbell(peer); return true;
    case Fastbox::Sender::Outcome::Sent: return true;
  }
  return false;
}

namespace {

std::uint64_t cookie_of(const Request& handle) noexcept {
  return std::uint64_t{handle.slot} << 32 | handle.generation;
}

Request request_of(std::uint64_t cookie) noexcept {
  return Request{static_cast<std::uint32_t>(cookie >> 32), static_cast<std::uint32_t>(cookie)};
}

}  // namespace

bool UcxHub::write_rendezvous(Peer& peer, const Request& handle, const Pending& send) {
  const Fastbox::Message message{send.tag, send.bytes, send.fastbox->large_before,
                                 Fastbox::Kind::Rendezvous, send.fastbox->posted_at};
  // The last 8 bytes travel with the announcement: the receiver reads the seal into their place
  // (read_sealed_process_memory).
  std::uint64_t tail = 0;
  const std::size_t tail_bytes = std::min(send.bytes, sizeof tail);
  std::memcpy(&tail,
              static_cast<const std::byte*>(send.fastbox->send_data) + send.bytes - tail_bytes,
              tail_bytes);
  const Fastbox::Rendezvous body{reinterpret_cast<std::uintptr_t>(send.fastbox->send_data),
                                 cookie_of(handle), send.fastbox->seal.location(),
                                 send.fastbox->seal.value(), tail};
  return delivered(peer, peer.to_peer.try_send_rendezvous(message, body));
}

void UcxHub::acknowledge(Peer& peer, std::uint64_t cookie, int error,
                         const Request& receive) noexcept {
  const Fastbox::Ack ack{cookie, error};
  // Not between the pieces of a spread message (flush_acks sends it after them).
  if (peer.queued_acks.empty() && !peer.withdrawal_queued && !half_written(peer) &&
      delivered(peer, peer.to_peer.try_send_ack(ack)))
    return;
  // The ring is taken: full, or between the pieces of a spread message from this rank, which
  // the peer takes only when it next makes progress, perhaps only after this receive
  // completes (both ranks would wait). So the ack goes by UCX; it waits for the ring only if
  // UCX cannot take it at once either.
  if (send_ack_message(peer, ack)) return;
  peer.queued_acks.push_back(QueuedAck{ack, receive});
  // Its receive ends only once the ack is written (flush_acks clears this).
  if (Pending* recv = requests_.find(receive); recv != nullptr) recv->ack_queued = true;
}

bool UcxHub::flush_acks(Peer& peer) noexcept {
  bool moved = false;
  if (peer.withdrawal_queued || half_written(peer)) return false;  // after the last piece
  while (!peer.queued_acks.empty() &&
         delivered(peer, peer.to_peer.try_send_ack(peer.queued_acks.front().ack))) {
    if (Pending* recv = requests_.find(peer.queued_acks.front().receive); recv != nullptr)
      recv->ack_queued = false;
    peer.queued_acks.pop_front();
    moved = true;
  }
  return moved;
}

void UcxHub::settle_rendezvous(Peer& peer, const Request& handle, Pending& recv, bool accepted,
                               const Fastbox::Rendezvous& message) noexcept {
  if (accepted) {
    // Copied by the next thread out of the lock (run_ready_copies).
    ready_copies_.push_back(ReadyCopy{handle, message});
    recv.copy = Copy::Ready;
    ready_copies_hint_.store(true, std::memory_order_relaxed);
  } else {
    acknowledge(peer, message.cookie, 0, handle);
  }
}

void UcxHub::run_ready_copies() noexcept {
  std::unique_lock lock(mutex_);
  while (!ready_copies_.empty()) {
    const auto [handle, message] = ready_copies_.front();
    ready_copies_.pop_front();
    Pending* recv = requests_.find(handle);
    if (recv == nullptr || recv->copy != Copy::Ready) continue;  // withdrawn meanwhile
    recv->copy = Copy::Running;
    Peer& peer = *peers_[static_cast<std::size_t>(recv->peer)];
    void* const into = recv->fastbox->recv_data;
    const std::size_t bytes = recv->bytes;
    lock.unlock();
    const int error = copy_rendezvous(peer, into, bytes, message);
    lock.lock();
    // Still there: nothing releases a receive whose copy runs (cancel_owned waits for it).
    recv = requests_.find(handle);
    recv->copy = Copy::None;
    finish_rendezvous(peer, handle, *recv, message, error);
    note_progress(true);
  }
  ready_copies_hint_.store(false, std::memory_order_relaxed);
}

int UcxHub::copy_rendezvous(const Peer& peer, void* into, std::size_t bytes,
                            const Fastbox::Rendezvous& message) noexcept {
  // The stamp's load (under the lock, before this) ordered the sender's stores to its buffer
  // before it. The seal, read through the pid after the bytes in the same system call, says
  // whether the send still stood, and that the pid is still the sender's (its values start at
  // random): a sender that died before the copy and left its pid to another process fails the
  // receive rather than fill it with that process's memory.
  const auto* from = reinterpret_cast<const void*>(static_cast<std::uintptr_t>(message.address));
  return read_sealed_process_memory(peer.pid, into, from, bytes, message.seal_at, message.seal,
                                    message.tail);
}

void UcxHub::finish_rendezvous(Peer& peer, const Request& handle, Pending& recv,
                               const Fastbox::Rendezvous& message, int error) noexcept {
  // Only a failed copy asks whether the sender still lives (a system call): a sender that died,
  // and perhaps left its pid to another process, is named as gone, not as cancelling.
  if (error != 0 && error != ESRCH && peer.watch.watching() && !peer.watch.alive()) error = ESRCH;
  if (error != 0) {
    try {
      const std::string sender = "rank " + std::to_string(recv.origin.peer_label);
      recv.fastbox->failure =
          error == ECANCELED
              ? std::make_unique<Error>(ErrorCode::RemoteError,
                                        describe(recv) + ": " + sender +
                                            " cancelled the send (its communicator was destroyed "
                                            "or aborted) before this receive copied it")
              : std::make_unique<Error>(
                    error == ESRCH ? ErrorCode::RemoteError : ErrorCode::SystemError,
                    describe(recv) + ": copying the message out of " + sender +
                        "'s memory failed (" +
                        (error == ESRCH ? std::string("its process exited")
                                        : std::string(std::strerror(error))) +
                        ")");
    } catch (...) {
      recv.request = UcxRequest::failed(UcxRequest::Kind::Recv, UCS_ERR_NO_MEMORY);
    }
  }
  if (error == 0 && recv.fastbox->timed)
    note_received(peer, recv.bytes, RingRouteChoice::Route::Rendezvous, message.sent_at,
                  recv.fastbox->posted_at);
  // After the copy: the sender may reuse its buffer once it sees this.
  memory_fence(std::memory_order_seq_cst);
  acknowledge(peer, message.cookie, error, handle);
}

void UcxHub::complete_rendezvous_send(const Peer& peer, const Fastbox::Ack& ack) noexcept {
  Pending* send = requests_.find(request_of(ack.cookie));
  // Gone: its owner cancelled it (and its handle's generation moved on).
  if (send == nullptr || !send->fastbox || send->peer != peer.rank) return;
  send->fastbox->matched = true;
  if (ack.error == 0) return;
  try {
    const std::string receiver = "rank " + std::to_string(send->origin.peer_label);
    send->fastbox->failure = std::make_unique<Error>(
        ErrorCode::RemoteError,
        describe(*send) + ": " +
            (ack.error == ECANCELED
                 ? receiver + " cancelled its receive (its communicator was destroyed or "
                              "aborted) before copying the message"
                 : receiver + " could not copy the message out of this process's memory (" +
                       std::strerror(ack.error) + ")"));
  } catch (...) {
    send->request = UcxRequest::failed(UcxRequest::Kind::Send, UCS_ERR_NO_MEMORY);
  }
}

bool UcxHub::accept(Pending& recv, std::uint64_t bytes, std::uint32_t large_before) {
  FastboxPart& part = *recv.fastbox;
  part.matched = true;
  if (!at_or_after(part.large_before, large_before)) {
    // More large messages with this tag were sent before this one than large receives were
    // posted before this receive: its own message is one of those (see ucx_hub.hpp).
    const auto large = large_message_waiting(recv);
    part.disagreement = large ? message_of(*large) : "a message too large for the ring";
    return false;
  }
  if (bytes != recv.bytes) {
    part.disagreement = message_of(bytes);
    return false;
  }
  recv.request = UcxRequest::completed(UcxRequest::Kind::Recv, bytes);
  return bytes > 0;
}

bool UcxHub::progress_fastboxes() noexcept {
  bool moved = false;
  for (Peer* peer : fastbox_peers_) {
    if (peer->from_peer.attached()) {
      // A spread message's pieces come first: nothing after them can be in the ring before.
      if (peer->incoming && continue_incoming(*peer)) moved = true;
      while (!peer->incoming) {
        const auto message = peer->from_peer.peek();
        if (!message) break;
        moved = true;
        if (message->kind == Fastbox::Kind::Ack) {
          complete_rendezvous_send(*peer, peer->from_peer.ack());
          peer->from_peer.pop();
          continue;
        }
        std::optional<Fastbox::Rendezvous> rendezvous;
        if (message->kind == Fastbox::Kind::Rendezvous) rendezvous = peer->from_peer.rendezvous();
        // Its receive: the oldest with its tag, skipping the large receives whose messages were
        // sent before it (see ucx_hub.hpp).
        const auto waiting = std::find_if(
            peer->posted_recvs.begin(), peer->posted_recvs.end(), [&](const Request& r) {
              const Pending& recv = *requests_.find(r);
              return recv.tag == message->tag &&
                     (!recv.large || at_or_after(recv.large->index, message->large_before));
            });
        const bool spread = message->kind == Fastbox::Kind::Spread;
        if (spread) peer->incoming = Incoming{.bytes = message->bytes};
        if (waiting != peer->posted_recvs.end()) {
          Pending& recv = *requests_.find(*waiting);
          if (recv.large) {
            // Its receive, yet too large for the ring: the sizes disagree (poll_request says so).
            recv.large->ring_message = message->bytes;
            recv.request.cancel();
            if (rendezvous) acknowledge(*peer, rendezvous->cookie, 0, *waiting);
          } else if (spread) {
            // Its pieces go to the receive as they come (or nowhere, when the sizes disagree).
            if (accept(recv, message->bytes, message->large_before)) {
              peer->incoming->receive = *waiting;
              peer->incoming->timed =
                  recv.fastbox->posted_at != 0 &&
                  times_receive(*peer, message->bytes, RingRouteChoice::Route::Spread) &&
                  ring_lapped(peer->from_peer.taken());
              recv.fastbox->matched = false;
              recv.fastbox->streaming = true;
            }
          } else if (rendezvous) {
            recv.fastbox->timed =
                recv.fastbox->posted_at != 0 &&
                times_receive(*peer, message->bytes, RingRouteChoice::Route::Rendezvous);
            settle_rendezvous(*peer, *waiting, recv,
                              accept(recv, message->bytes, message->large_before), *rendezvous);
          } else if (accept(recv, message->bytes, message->large_before)) {
            peer->from_peer.read(*message, recv.fastbox->recv_data);
          }
          // Most often the oldest: popping it is a tenth of erase()'s cost on a deque.
          if (waiting == peer->posted_recvs.begin()) {
            peer->posted_recvs.pop_front();
          } else {
            peer->posted_recvs.erase(waiting);
          }
        } else {
          Unexpected early{message->tag, message->bytes, message->large_before, {}, 0, rendezvous};
          if (!rendezvous) early.data.resize(message->bytes);
          if (spread) {
            peer->incoming->to_unexpected = true;
          } else if (!rendezvous) {
            peer->from_peer.read(*message, early.data.data());
            early.arrived = message->bytes;
          }
          peer->unexpected.push_back(std::move(early));
        }
        // A spread message's slots are taken with its pieces.
        if (spread) {
          continue_incoming(*peer);
          continue;
        }
        peer->from_peer.pop();
      }
      // Its sender may sleep until these pops make the room it asked for.
      if (peer->from_peer.room_made()) ring_doorbell(*peer);
    }
    // What a thread about to sleep asks room for is what this round refused: an earlier
    // round's refusal may be of a write that went another way since, or was cancelled.
    peer->to_peer.forget_refusals();
    // A withdrawn spread message's last piece first; then acks, unless a spread message is
    // half-written (they wait for its last piece); then the queued sends, in order.
    if (peer->withdrawal_queued) {
      if (!flush_withdrawal(*peer)) continue;
      moved = true;
    }
    if (!peer->queued_acks.empty() && flush_acks(*peer)) moved = true;
    while (!peer->queued_sends.empty()) {
      const Request handle = peer->queued_sends.front();
      Pending& send = *requests_.find(handle);
      if (send.fastbox->rendezvous) {
        // Announced; it completes with the receiver's ack.
        if (!write_rendezvous(*peer, handle, send)) break;
        peer->queued_sends.pop_front();
        moved = true;
        continue;
      }
      if (send.fastbox->spread) {
        const std::uint64_t before = send.fastbox->spread_done;
        if (!write_spread(*peer, send)) {
          if (send.fastbox->spread_done != before) moved = true;
          break;
        }
      } else if (send.bytes > Fastbox::kInlineBytes) {
        // Its turn: every send before it is in the ring now (see behind_queued_fastbox_sends).
        send.request =
            UcxRequest::send(worker_.get(), peer->endpoint.get(), send.fastbox->send_data,
                             send.bytes, with_source(send.tag, static_cast<std::uint32_t>(rank_)));
      } else if (!write_fastbox(*peer, {send.tag, send.bytes, send.fastbox->large_before},
                                send.fastbox->send_data)) {
        break;
      }
      send.fastbox->matched = true;
      peer->queued_sends.pop_front();
      moved = true;
    }
    // Acks held back for a spread message that is whole now go at once, not a round later.
    if (!peer->queued_acks.empty() && flush_acks(*peer)) moved = true;
  }
  return moved;
}

bool UcxHub::fastbox_has_incoming() const noexcept {
  return std::any_of(fastbox_peers_.begin(), fastbox_peers_.end(), [](const Peer* peer) {
    return peer->from_peer.attached() && peer->from_peer.peek().has_value();
  });
}

void UcxHub::ring_doorbell(Peer& peer) noexcept {
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  param.flags = UCP_AM_SEND_FLAG_EAGER;
  const ucs_status_ptr_t result =
      ucp_am_send_nbx(peer.endpoint.get(), kDoorbellId, nullptr, 0, nullptr, 0, &param);
  if (UCS_PTR_IS_ERR(result)) {
    // The peer then wakes at its next timed look (at most kMaxBlock later).
    COHORT_LOG_DEBUG("ringing world rank {}'s doorbell failed ({})", peer.rank,
                     ucs_status_string(UCS_PTR_STATUS(result)));
  } else if (result != nullptr) {
    ucp_request_free(result);  // completes on its own; nothing waits for it
  }
}

bool UcxHub::send_ack_message(Peer& peer, const Fastbox::Ack& ack) noexcept {
  const AckWire wire{rank_, ack.error, ack.cookie};
  return send_at_once(peer.endpoint.get(), kAckId, &wire, sizeof wire);
}

void UcxHub::remove_message_handlers() noexcept {
  for (const unsigned id : {kAckId, kWithdrawalId}) {
    ucp_am_handler_param_t handler{};
    handler.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB;
    handler.id = id;
    handler.cb = nullptr;
    if (const ucs_status_t status = ucp_worker_set_am_recv_handler(worker_.get(), &handler);
        status != UCS_OK)
      COHORT_LOG_WARN("removing an active-message handler failed ({})", ucs_status_string(status));
  }
}

bool UcxHub::send_withdrawal_message(Peer& peer) noexcept {
  const WithdrawalWire wire{rank_, 0, peer.to_peer.written()};
  return send_at_once(peer.endpoint.get(), kWithdrawalId, &wire, sizeof wire);
}

ucs_status_t UcxHub::on_withdrawal_message(void* arg, const void* header, std::size_t header_length,
                                           void*, std::size_t,
                                           const ucp_am_recv_param_t*) noexcept {
  WithdrawalWire wire;
  Peer* peer = static_cast<UcxHub*>(arg)->message_sender(header, header_length, wire);
  if (peer == nullptr) return UCS_OK;
  // progress_fastboxes, after this progress of the worker, ends the message there. Kept even
  // before this rank has attached its end of the ring: the peer may have written, withdrawn
  // and told it while this rank still waited in connect_fastboxes.
  try {
    peer->withdrawn_at.push_back(wire.end);  // in order: the peer's written() only grows
  } catch (...) {
    COHORT_LOG_WARN("a withdrawal from rank {} was dropped (out of memory)", wire.rank);
  }
  return UCS_OK;
}

ucs_status_t UcxHub::on_ack_message(void* arg, const void* header, std::size_t header_length, void*,
                                    std::size_t, const ucp_am_recv_param_t*) noexcept {
  auto& hub = *static_cast<UcxHub*>(arg);
  AckWire wire;
  if (const Peer* peer = hub.message_sender(header, header_length, wire); peer != nullptr)
    hub.complete_rendezvous_send(*peer, Fastbox::Ack{wire.cookie, wire.error});
  return UCS_OK;
}

template <class Wire>
UcxHub::Peer* UcxHub::message_sender(const void* header, std::size_t header_length,
                                     Wire& wire) noexcept {
  if (header_length != sizeof wire) {
    COHORT_LOG_WARN("an active message of {} bytes was dropped (expected {})", header_length,
                    sizeof wire);
    return nullptr;
  }
  std::memcpy(&wire, header, sizeof wire);
  if (wire.rank < 0 || wire.rank >= size_) return nullptr;
  Peer& peer = *peers_[static_cast<std::size_t>(wire.rank)];
  return peer.same_host ? &peer : nullptr;
}

void UcxHub::forget_fastbox_requests(const void* owner) noexcept {
  const auto owned = [&](const Request& request) {
    const Pending* pending = requests_.find(request);
    return pending != nullptr && pending->origin.owner == owner;
  };
  for (Peer* peer : fastbox_peers_) {
    // A spread send with some pieces in the ring: an active message ends the message there,
    // now, or when UCX cannot take one at once, a Withdrawal piece, once the ring has room.
    if (half_written(*peer) && owned(peer->queued_sends.front()) && !send_withdrawal_message(*peer))
      peer->withdrawal_queued = true;
    std::erase_if(peer->queued_sends, owned);
    std::erase_if(peer->posted_recvs, owned);
    // Its receive is released after this: the rest of its spread message goes nowhere.
    if (peer->incoming && peer->incoming->receive.valid() && owned(peer->incoming->receive))
      drop_incoming(*peer);
  }
}

namespace testing {

void refuse_immediate_messages(bool refuse) noexcept {
  refusing_immediate_messages.store(refuse, std::memory_order_relaxed);
}

void slow_receive_timings(RingRouteChoice::Route route, std::chrono::nanoseconds extra) noexcept {
  receive_timing_additions[static_cast<std::size_t>(route)].store(
      static_cast<std::uint64_t>(extra.count()), std::memory_order_relaxed);
}

}  // namespace testing

}  // namespace cohort::transport::ucx
