#pragma once

// UcxHub: one process's UCX connections to the ranks of a world: one worker (one tag-matching
// queue and progress engine), one endpoint per world rank (itself included), one table of
// requests. A world's communicator and every communicator split from it send through the same
// hub, each through a UcxTransport view that translates its ranks to world ranks; their messages
// are kept apart by the tag id in every tag (tag_ids.hpp). So a sub-communicator costs no worker,
// no endpoint and no handshake, and any thread progressing the worker moves every communicator's
// messages along.
//
// Peer failure: remote peers use UCX's peer-failure handling (error callback); same-host peers
// are connected without it, so UCX may use shared memory, and are watched through their pid
// instead. Either way a pending request with a failed peer fails with RemoteError in wait().
//
// Small point-to-point messages between same-host peers (user send/recv, the tags with the p2p
// flag, of at most Fastbox::kInlineBytes) go through fastboxes (transport/fastbox.hpp) instead
// of UCX: the message is copied into the receiver's ring and its send completes at once
// (Request::completed(), unless the ring is full). Sizes above that up to 32 KiB go through UCX,
// those up to 512 KiB spread over the ring's slots, and the largest by rendezvous through the
// rings (below). Both sides pick the way by size (and by what the pair
// agreed at construction; within 32-512 KiB the sender picks spread or rendezvous by measurement,
// and the receiver takes a ring message of either kind), so a send and its receive meet when they
// agree on the size; the receiver matches ring messages to receives per tag, oldest first, as UCX
// does. When they disagree across a limit, the receive still fails with "sizes disagree" naming the
// size, as a UCX receive would ("large" below: sent through UCX):
// - a small receive sees the large message waiting in UCX (ucp_tag_probe_nb) while nothing came
//   through the ring for it;
// - a large receive is told apart from a later one by counting. Per peer and tag, the sender
//   counts its large sends and stamps each ring message with how many came before it (L); the
//   receiver numbers its large receives (i) and keeps them in the queue of posted receives with
//   the small ones. Sends and receives pair in order, so in a program whose sizes agree the large
//   receives that come before a ring message's receive are exactly those with i < L. A ring
//   message therefore goes to the oldest posted receive with its tag that is small or has
//   i >= L; when that one is large, the sizes disagree, and its UCX receive is cancelled. A
//   small receive notes how many large ones came before it, which must equal its message's L:
//   when it is smaller, the receive's own message is a large one sent earlier.
//   The counts belong to a communicator's tag id and are forgotten with it (forget_tag_id), on
//   every member before the id is reused (tag_ids.hpp).
// Where the pair allows a rendezvous at those sizes too (every rank of the host has a hardware
// thread, COHORT_SINGLE_COPY is on), the sender chooses per size class between the spread and
// the rendezvous below by measuring both (ring_route_choice.hpp; COHORT_MEASURED_CHOICE=off
// keeps the spread); the receiver takes either as it comes.
// Spread messages (above kSpreadAbove, up to kSpreadMax) are copied into as many of the ring's
// slots as they fill, all at once when they fit in the ring (a send waits in the queue until it
// has room for every piece), else a part at a time as the receiver frees slots; the send is
// complete once the last piece is in. Nothing else goes into that ring between two pieces of
// one message (later sends wait in queued_sends: half_written; acks go around it, below), and a
// message cancelled after its first part is withdrawn, which fails its receive: by an active
// message naming the ring slot where its pieces end (Peer::withdrawn_at), or, when UCX cannot
// take one at once, a Withdrawal piece once the ring has room (Peer::withdrawal_queued). The
// receiver matches the first piece like a small message
// and copies the pieces out as they come, into its receive or, when none is posted yet, into
// an unexpected message. Nothing else comes from that ring until the last piece, or the
// Withdrawal, is taken (Peer::incoming). Like UCX's eager messages, they are sent whether or not a
// receive waits: a receiver that takes messages from its ring without posting their receives holds
// each one (up to 512 KiB) until it does, with no limit on how many. Large point-to-point messages
// (above kRendezvousAbove and kSpreadMax, or above 4 MiB on a host with more ranks than hardware
// threads) between same-host peers with rings both ways, each able to read the other's memory, take
// the ring too, by rendezvous: the sender puts the message's address in the ring
// (Fastbox::Kind::Rendezvous) and its send stays pending; the receiver, once a receive matches it,
// copies the bytes straight out of the sender's memory (process_vm_readv, one copy where UCX's
// eager path makes two and its rendezvous protocol takes more round trips) and answers through its
// own ring (Kind::Ack), which completes the send. They are ring messages like the small ones
// (matched in the same order, never counted as large), so the size rules above hold for four
// classes: small, UCX's middle sizes, spread, and rendezvous. COHORT_SINGLE_COPY=off on either rank
// keeps a pair's messages above 512 KiB on UCX. The copy runs without the mutex, made by the thread
// whose round matched the announcement as it leaves the lock (run_ready_copies), so other threads'
// ops go on meanwhile; the sender's seal, read after the bytes, tells a copy of a send cancelled
// meanwhile (send_seal.hpp). An ack the ring back cannot take (full, or between the pieces of
// this rank's spread message, which the peer may take only after this receive ends) goes as an
// active message; only when UCX cannot take that at once either does it wait in queued_acks,
// and its receive ends once the ack is in the ring, so a receiver that stops calling the
// transport leaves no sender waiting (a UCX-sized receive that meets an announcement too). A
// thread about to sleep while something waits for room in a peer's ring asks that peer to ring
// its doorbell once it has made the room (Fastbox::Sender::want_room). Collectives' messages (no
// p2p flag) always go through UCX. COHORT_SHARED_MEMORY=off on either rank of a pair, or a segment
// that cannot be mapped, leaves that pair on UCX; both ranks agree on it at construction.
//
// Threads: every member function may be called from any thread. One mutex guards the worker,
// the endpoints' state and the table; wait() holds it for one progress round at a time and never
// while sleeping, so ops of different communicators driven from different threads (a blocking op
// on one, the progress thread of another) never wait on each other's locks for longer than a
// round. A thread that sleeps on the worker's event fd is woken when another thread's progress
// may have completed its requests.

#include "core/tunables.hpp"
#include "transport/fastbox.hpp"
#include "transport/interruption.hpp"
#include "transport/process_watch.hpp"
#include "transport/request_table.hpp"
#include "transport/ring_route_choice.hpp"
#include "transport/send_seal.hpp"
#include "transport/tag_ids.hpp"
#include "transport/transport.hpp"
#include "transport/ucx/peer_address.hpp"
#include "transport/ucx/sleepers.hpp"
#include "transport/ucx/ucx_endpoint.hpp"
#include "transport/ucx/ucx_request.hpp"
#include "transport/ucx/ucx_worker.hpp"
#include "transport/wait_policy.hpp"

#include <cohort/error.hpp>
#include <cohort/store.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace cohort::transport::ucx {

class UcxHub {
 public:
  /// Collective over the world: first agrees with every rank whether the world spans hosts
  /// (transport/host_span.hpp, keys under "<key_prefix>/host_span/"), which configures the UCX
  /// context (ucx_context.hpp); then publishes this rank's address under
  /// "<key_prefix>/addr/<rank>", reads every peer's, connects, and exchanges an empty message
  /// with every peer so all connections are fully established before the first op. All of it
  /// by `connect_deadline`: the stages share one deadline.
  /// `local_world_size` is how many of the world's ranks share this host (it sizes busy-polling).
  UcxHub(Store& store, const std::string& key_prefix, int rank, int size, int local_world_size,
         Deadline connect_deadline);
  ~UcxHub();
  UcxHub(const UcxHub&) = delete;
  UcxHub& operator=(const UcxHub&) = delete;

  int rank() const noexcept { return rank_; }
  int size() const noexcept { return size_; }
  /// The tag ids of the communicators using this hub.
  const std::shared_ptr<TagIdPool>& tag_ids() const noexcept { return tag_ids_; }

  /// Who posts a request, for error messages and cancellation: the communicator's view, and the
  /// peer's rank as that communicator numbers it.
  struct Origin {
    const void* owner = nullptr;
    int peer_label = 0;
  };

  /// Sends to world rank `peer`; the tag's source bits are set to this rank's world rank.
  Request post_send(int peer, const void* data, std::size_t bytes, Tag tag, Origin origin);
  /// Receives from world rank `peer`.
  Request post_recv(int peer, void* data, std::size_t bytes, Tag tag, Origin origin);
  /// Transport::wait / test (see transport.hpp).
  /// `interruption` (may be null): checked every round; raised, the wait throws its error.
  void wait(std::span<const Request> requests, Deadline deadline, const std::string& what,
            const Interruption* interruption = nullptr);
  /// Wakes every thread sleeping in wait() so it looks at its interruption again. Never throws.
  void wake_sleepers() noexcept;
  bool test(const Request& request);
  /// Cancels and releases every pending request posted by `owner`. A request UCX still has (a
  /// send in flight, a receive already being filled) is kept, not freed, until it ends or the
  /// endpoints close (abandoned_). Never throws.
  void cancel_owned(const void* owner) noexcept;
  /// Transport::retain_until_quiet: `keep` lives until no request of tag id `tag_id` that
  /// cancel_owned() abandoned is left (dropped at once when there is none). Never throws.
  void retain_until_quiet(std::uint32_t tag_id, std::shared_ptr<void> keep) noexcept;
  /// The communicator with tag id `id` is gone on this rank: forgets its per-tag counts of
  /// messages too large for the rings, and its messages taken from a ring that no receive will
  /// claim now. Call after cancel_owned for its requests. Never throws.
  void forget_tag_id(std::uint32_t id) noexcept;
  std::string description() const;
  /// Hardware threads this host's ranks of the world may run on (cpu_set.hpp): the union of
  /// their affinity masks, exchanged with the addresses.
  unsigned host_cpus() const noexcept { return host_cpus_; }

 private:
  /// A message taken from a peer's ring before a receive for it was posted.
  struct Unexpected {
    Tag tag = 0;
    std::uint64_t bytes = 0;
    std::uint32_t large_before = 0;  ///< Fastbox::Message::large_before
    std::vector<std::byte> data;     ///< an inline or spread message's bytes
    /// The bytes taken from the ring so far: all of an inline message's, and a spread
    /// message's as its pieces come.
    std::uint64_t arrived = 0;
    /// Set: a rendezvous message, whose bytes are still in the sender's memory (and whose
    /// sender waits for an Ack).
    std::optional<Fastbox::Rendezvous> rendezvous;
    /// A spread message whose sender withdrew it after its first part: its receive fails.
    bool withdrawn = false;
    /// All of it is here, or all there will be (a rendezvous message's bytes stay with its
    /// sender).
    bool whole() const noexcept { return rendezvous || withdrawn || arrived == bytes; }
  };
  /// A spread message whose pieces are still arriving (at most one per peer: its sender wrote
  /// them one after another, so nothing else comes from that ring before they are all taken).
  struct Incoming {
    std::uint64_t bytes = 0;  ///< the message's size
    std::uint64_t done = 0;   ///< bytes taken so far
    Request receive;          ///< valid: the fastbox receive it fills
    /// It met its receive waiting, and is timed for the pair's route choice
    /// (ring_route_choice.hpp); sent_at: Fastbox::Message::sent_at, once a piece brought it.
    bool timed = false;
    std::uint64_t sent_at = 0;
    /// It fills the newest of the peer's unexpected messages. Neither this nor a receive: its
    /// pieces are dropped (its receive was cancelled, or refused it for its size).
    bool to_unexpected = false;
  };
  /// An ack waiting for room, and the receive that copied its message (invalid: none waits).
  struct QueuedAck {
    Fastbox::Ack ack;
    Request receive;
  };
  /// Per tag: how many point-to-point messages too large for the ring went to or came from a
  /// peer (see the top of this file). One entry per tag that carried such a message, kept until
  /// its communicator's tag id is forgotten (the world's: for the life of the process), since a
  /// later small message on that tag needs the count.
  using LargeCounts = std::unordered_map<Tag, std::uint32_t>;
  struct Peer {
    int rank = -1;
    bool same_host = false;
    bool failed = false;
    /// A UCX send to this peer was released still in flight (cancelled, or its owner gone), or a
    /// matched receive from it was kept in flight (abandoned_; a forced close ends it too). UCX
    /// cannot cancel a send, so a rendezvous the peer never received would stay in the endpoint:
    /// UCX 1.13 then aborts when the worker is destroyed (ucp_ep.c, "proto_reqs"). The endpoint
    /// is therefore flushed and then closed by force at teardown (where it handles peer failure,
    /// as UCX requires: endpoints to other hosts), which fails the send instead; the peer sees
    /// this rank leave. Never cleared: one abandoned send suffices, even if it completed later.
    /// Between ranks of one host (no peer-failure handling) the flushing close stays, and such
    /// a send could still meet that abort.
    bool abandoned_send = false;
    std::string failure;  // why, once failed
    ProcessWatch watch;   // same-host peers only
    UcxEndpoint endpoint;
    // Fastboxes (same-host peers only; see the top of this file).
    pid_t pid = 0;
    std::int32_t fastbox_fd = -1;  ///< its inbox's descriptor in its process; -1: none
    int local_index = -1;          ///< its place among this host's ranks, in world order
    /// This process read its probe through its pid (and COHORT_SINGLE_COPY is not off here).
    bool readable = false;
    Fastbox peer_inbox;           ///< its inbox, mapped here
    Fastbox::Sender to_peer;      ///< attached: p2p messages to it go through its inbox
    Fastbox::Receiver from_peer;  ///< attached: its p2p messages come through our inbox
    /// Messages larger than this go through the rings by rendezvous, both ways (the larger of
    /// the two ranks' rendezvous_limit(), agreed at construction), those of at most kSpreadMax
    /// only where the pair's route choice says so (measured_class); kNoRendezvous: none.
    std::uint64_t rendezvous_above = kNoRendezvous;
    std::deque<QueuedAck> queued_acks;  ///< acks waiting for room in its ring, in order
    std::deque<Request> queued_sends;   ///< sends whose message waits for room, in order
    /// A spread message was cancelled after some of its pieces went: the Withdrawal piece that
    /// ends it waits for room, and nothing else goes into the ring before it.
    bool withdrawal_queued = false;
    /// Spread messages the peer withdrew by active message (their Withdrawal pieces found no
    /// room), oldest first: each ends before this slot number of its ring to this rank
    /// (Fastbox::Sender::written() there when it withdrew it). Dropped once taken past.
    std::deque<std::uint64_t> withdrawn_at;
    /// Receives a ring message may meet, in posting order: those waiting for their message
    /// through the ring, and (when it has a ring to this rank) point-to-point receives too large
    /// for it, until they complete.
    std::deque<Request> posted_recvs;
    std::deque<Unexpected> unexpected;  ///< messages waiting for their receive, in order
    std::optional<Incoming> incoming;   ///< a spread message still arriving from its ring
    LargeCounts large_sends;            ///< sent through UCX to its ring, by tag
    LargeCounts large_recvs;            ///< receives from its ring posted to UCX, by tag
    /// Spread or rendezvous for middle-sized messages to it, measured (measured_class).
    RingRouteChoice routes;
  };
  /// The fastbox side of a send or receive that goes through one.
  struct FastboxPart {
    /// A receive's message arrived (or a disagreement was found); a send's message is in the
    /// ring (a rendezvous send: the receiver acked it).
    bool matched = false;
    void* recv_data = nullptr;
    const void* send_data = nullptr;
    /// A send's stamp (Fastbox::Message::large_before); for a receive, the large receives with
    /// its tag posted before it, which equals its message's stamp when the sizes agree.
    std::uint32_t large_before = 0;
    std::string
        disagreement;  ///< set: the message matched had another size ("a message of 4 bytes")
    /// test() calls on it that looked at the rings alone (see test()). Per request: a count
    /// shared by the hub let the full rounds fall on one of several waiting receives.
    std::uint32_t ring_only_rounds = 0;
    /// A receive matched to a spread message whose pieces are still arriving (Peer::incoming):
    /// in progress, though its sizes agreed.
    bool streaming = false;
    /// Set once matched: a rendezvous copy failed (the receiver's read, or as the sender's ack
    /// reported it). poll_request throws it.
    std::unique_ptr<Error> failure;
    /// A rendezvous send's seal, broken when the send is released (completed or cancelled).
    SendSeal seal;
    /// A spread send's bytes in the ring so far.
    std::uint64_t spread_done = 0;
    /// A send's way through the ring, chosen when posted (spread_this): spread over its slots,
    /// or by rendezvous; neither: one slot, or UCX once its turn comes.
    bool spread = false;
    bool rendezvous = false;
    /// For a send or receive of a measured class (measured_class): when it was posted (steady
    /// clock, ns; a send's travels with its message as Fastbox::Message::sent_at); else 0.
    std::uint64_t posted_at = 0;
    /// A receive whose rendezvous message met it waiting: its transfer is timed for the route
    /// choice (note_received).
    bool timed = false;
  };
  /// Where a fastbox receive's rendezvous copy stands. It is made outside the hub's lock (see
  /// run_ready_copies), so a large copy holds up no other thread's sends, receives and progress.
  enum class Copy : std::uint8_t {
    None,
    Ready,   ///< accepted, in ready_copies_: the next thread out of the lock makes it
    Running  ///< a thread copies it now, without the lock; nothing may release the receive
  };
  /// A point-to-point receive too large for the ring, from a peer with a ring to this rank.
  struct LargeRecv {
    std::uint32_t index = 0;  ///< such receives with its tag from that peer before it
    /// Set: a ring message of this size turned out to be its message (the sizes disagree).
    std::optional<std::uint64_t> ring_message;
  };
  struct Pending {
    int peer;  // world rank
    Origin origin;
    std::size_t bytes;  // expected size of a receive
    Tag tag;
    UcxRequest request;  ///< for fastbox messages, UcxRequest::completed once matched
    std::optional<FastboxPart> fastbox;
    std::optional<LargeRecv> large;
    /// A receive took a rendezvous message (copied it, or refused it for its size, or failed),
    /// but its ack waits for room in the ring back (Peer::queued_acks; only when neither the
    /// ring nor UCX could take it at once): it ends when the ack is written. A receive too
    /// large for the ring that met one (sizes disagree) too.
    bool ack_queued = false;
    Copy copy = Copy::None;  ///< a receive's rendezvous copy; in progress until None
  };

  /// Exchanges an empty message with every peer (see the .cpp for why).
  void handshake(Deadline deadline);
  static void on_endpoint_error(void* arg, ucp_ep_h ep, ucs_status_t status) noexcept;
  void check_peer(int peer, const char* what) const {
    if (peer < 0 || peer >= size_) [[unlikely]]
      refuse_peer(peer, what);
  }
  [[noreturn]] void refuse_peer(int peer, const char* what) const;
  // The members below are called with mutex_ held.
  void check_liveness() noexcept;
  /// Receives and discards every message with tag id `id` in UCX's unexpected queue, into no
  /// memory (truncated receives: nothing is allocated or copied for them).
  void drain_unexpected_ucx(std::uint32_t id) noexcept;
  /// Frees the abandoned requests UCX has finished, and hands back the owners retain_until_quiet()
  /// kept for tag ids none is left of, for the caller to drop after it lets go of the lock (their
  /// deleters are the application's code).
  std::vector<std::shared_ptr<void>> reap_abandoned() noexcept;
  /// Progresses the worker and the rings; wakes sleeping threads when something happened.
  void progress_locked() noexcept;
  /// After a progress step that `moved` something: counts it (progress_epoch_) and wakes the
  /// threads asleep in block_until, whose requests may be among those it completed.
  void note_progress(bool moved) noexcept;
  /// Polls one pending request: true when complete (throws on its failure, after releasing it;
  /// the message lists what is still pending among `all`).
  bool poll_request(const Request& request, Pending& pending, const std::string& what,
                    std::span<const Request> all);
  static std::string describe(const Pending& pending);
  /// "; still pending: receive from rank 2 (...), send to rank 3 (...)" or "".
  std::string pending_summary(std::span<const Request> requests);
  // Fastboxes (ucx_hub_fastbox.cpp); called with mutex_ held unless said otherwise.
  /// After the handshake: maps same-host peers' inboxes and agrees with each peer on which
  /// directions use a fastbox (one more small exchange). Without the lock (constructor).
  void connect_fastboxes(Deadline deadline);
  static constexpr std::uint64_t kNoRendezvous = UINT64_MAX;
  /// Point-to-point messages larger than this, and than kSpreadMax, go by rendezvous where the
  /// pair allows it, when every rank of the host has a hardware thread (from 32 KiB to
  /// kSpreadMax only where the pair measured the rendezvous faster than the spread:
  /// measured_class). UCX sends up to 32 KiB eagerly through shared
  /// memory (cohort sets UCX_MM_SEG_SIZE=33K), two copies but no round trip, which was faster
  /// than a rendezvous at 32 KiB (6.0-6.4 against 7.9-8.4 us per 2-rank exchange) and slower at
  /// 33 KiB, where UCX turns to its own rendezvous (10.0-11.4 against 8.1-8.8; see
  /// bench/PERFORMANCE-LOG.md).
  static constexpr std::uint64_t kRendezvousAbove = 32 * 1024;
  /// The same where the host's ranks outnumber its hardware threads. There the scheduler decides
  /// most of a large exchange's time: 3 ranks on 2 cores ran at 0.76-0.80 of UCX's speed at
  /// 64 KiB in two sets of launches, and anywhere from 0.61 to 1.34 of it from 512 KiB to 8 MiB
  /// (see bench/PERFORMANCE-LOG.md), so only messages above 4 MiB take the rendezvous there.
  static constexpr std::uint64_t kRendezvousAboveOversubscribed = 4 * 1024 * 1024;
  /// What this rank proposes to its peers (the pair takes the larger of the two proposals).
  std::uint64_t rendezvous_limit() const noexcept {
    return policy_.yield_while_spinning ? kRendezvousAboveOversubscribed : kRendezvousAbove;
  }
  /// Point-to-point messages larger than this, up to kSpreadMax, are spread over the ring's
  /// slots (Fastbox::Kind::Spread). Not smaller ones: UCX's eager path, two copies through its
  /// FIFO as well, takes them as fast, and multi-slot messages of 4-8 KiB were slower than it.
  static constexpr std::size_t kSpreadAbove = 32 * 1024;
  /// The largest spread message: twice what the ring holds, so its sender writes it in parts.
  /// On 2026-11-28's host two copies beat the rendezvous's one up to 512 KiB on pages of either
  /// size, and from 1 MiB the rendezvous won on 2 MiB pages; on 2026-12-02's the rendezvous won
  /// from 64 KiB, hence the measured choice below it (ring_route_choice.hpp,
  /// bench/PERFORMANCE-LOG.md).
  static constexpr std::size_t kSpreadMax = 512 * 1024;
  static_assert(kSpreadMax < Fastbox::kSpreadLimit);
  static bool by_spread(std::size_t bytes) noexcept {
    return bytes > kSpreadAbove && bytes <= kSpreadMax;
  }
  static_assert(kSpreadAbove == RingRouteChoice::kSmallest &&
                kSpreadMax == RingRouteChoice::kLargest &&
                RingRouteChoice::kClasses == Fastbox::kTimedClasses);
  /// A point-to-point message of `bytes` goes through the rings with `peer` (when attached).
  static bool ring_takes(const Peer& peer, std::size_t bytes) noexcept {
    return bytes <= Fastbox::kInlineBytes || by_spread(bytes) || bytes > peer.rendezvous_above;
  }
  /// The size class (ring_route_choice.hpp) of the pair's messages of `bytes` when they may go
  /// either way and this rank measures which (COHORT_MEASURED_CHOICE); -1 otherwise.
  static int measured_class(const Peer& peer, std::size_t bytes) noexcept {
    if (!by_spread(bytes) || bytes <= peer.rendezvous_above || !tunables().measured_choice)
      return -1;
    return RingRouteChoice::class_of(bytes);
  }
  /// Whether a send (by_spread) of measured class `size_class` (measured_class; -1: none) to
  /// `peer` goes spread rather than by rendezvous: always where only the spread is open to the
  /// pair, else as its route choice says, counting the send as a trial while the class has no
  /// verdict.
  bool spread_this(Peer& peer, int size_class) noexcept;
  /// Whether this rank times messages of `bytes` from `peer` that go `route` (either route:
  /// nullopt) for the pair's route choice.
  static bool times_receive(const Peer& peer, std::size_t bytes,
                            std::optional<RingRouteChoice::Route> route = std::nullopt) noexcept {
    const int c = measured_class(peer, bytes);
    return c >= 0 && (route ? peer.routes.wants_receive_timing(c, *route)
                            : peer.routes.wants_receive_timing(c));
  }
  /// Records a message of `bytes` from `peer` that went `route` and is in its receive's buffer
  /// now: sent at `sent_at`, received by a receive posted at `posted_at` (steady clock, ns).
  /// Publishes the class's medians in the ring once they are complete.
  static void note_received(Peer& peer, std::size_t bytes, RingRouteChoice::Route route,
                            std::uint64_t sent_at, std::uint64_t posted_at) noexcept;
  bool fastbox_send_route(const Peer& peer, Tag tag, std::size_t bytes) const noexcept {
    return (tag & kP2PFlag) != 0 && ring_takes(peer, bytes) && peer.to_peer.attached() &&
           !peer.failed;
  }
  bool fastbox_recv_route(const Peer& peer, Tag tag, std::size_t bytes) const noexcept {
    return (tag & kP2PFlag) != 0 && ring_takes(peer, bytes) && peer.from_peer.attached();
  }
  /// The oldest message with `tag` taken from `peer`'s ring and waiting for its receive, or
  /// peer.unexpected.end().
  static std::deque<Unexpected>::iterator oldest_unexpected(Peer& peer, Tag tag) {
    return std::find_if(peer.unexpected.begin(), peer.unexpected.end(),
                        [tag](const Unexpected& message) { return message.tag == tag; });
  }
  /// `counts`' entry for `tag`, 0 without one (no lookup while the map is empty).
  static std::uint32_t count_of(const LargeCounts& counts, Tag tag) noexcept {
    if (counts.empty()) return 0;
    const auto count = counts.find(tag);
    return count == counts.end() ? 0 : count->second;
  }
  /// "a message of 8 bytes", as size disagreements name what came.
  static std::string message_of(std::uint64_t bytes) {
    return "a message of " + std::to_string(bytes) + " bytes";
  }
  /// Count `index` is at or after stamp `large_before` (both count up from 0 and may wrap).
  static bool at_or_after(std::uint32_t index, std::uint32_t large_before) noexcept {
    return static_cast<std::int32_t>(index - large_before) >= 0;
  }
  /// A point-to-point message too large for the ring between this rank and `peer`, counted by
  /// tag on both sides (`sending`: from this rank).
  static bool counted_large(const Peer& peer, Tag tag, std::size_t bytes, bool sending) noexcept {
    return (tag & kP2PFlag) != 0 && !ring_takes(peer, bytes) &&
           (sending ? peer.to_peer.attached() : peer.from_peer.attached());
  }
  /// A p2p send too large for the ring while sends to `peer` wait for room in it: it queues
  /// behind them, so its message cannot reach UCX before theirs reach the ring. (The receiver
  /// relies on that order to tell a large message meant for a later receive from one that
  /// disagrees with the receive waiting now.)
  bool behind_queued_fastbox_sends(const Peer& peer, Tag tag) const noexcept {
    return (tag & kP2PFlag) != 0 && !peer.queued_sends.empty() && !peer.failed;
  }
  /// A send through `peer`'s ring, or (larger than the ring takes) one queued behind sends
  /// waiting for room in it, posted to UCX when its turn comes.
  Request post_fastbox_send(Peer& peer, const void* data, std::size_t bytes, Tag tag,
                            Origin origin);
  Request post_fastbox_recv(Peer& peer, void* data, std::size_t bytes, Tag tag, Origin origin);
  /// A receive too large for the ring from `peer` (counted_large): numbered and queued with the
  /// ring's receives, or, when a message taken from the ring already turned out to be its own,
  /// failed with that size without reaching UCX.
  Request post_large_recv(Peer& peer, void* data, std::size_t bytes, Tag tag, Origin origin);
  /// The size of a message waiting in UCX for fastbox receive `recv` (its sender thought it too
  /// large for the ring), if any.
  std::optional<std::size_t> large_message_waiting(const Pending& recv) noexcept;
  /// Puts a message into the peer's ring; false when the ring is full.
  bool write_fastbox(Peer& peer, const Fastbox::Message& message, const void* data);
  /// Puts as many pieces of spread send `send` into the peer's ring as it has room for; true
  /// once all are in.
  bool write_spread(Peer& peer, Pending& send);
  /// The first of the peer's queued sends is a spread message with some pieces in the ring, not
  /// all: nothing else may go into the ring (acks wait in queued_acks) until the rest follow.
  bool half_written(const Peer& peer) noexcept {
    if (peer.queued_sends.empty()) return false;
    const Pending* front = requests_.find(peer.queued_sends.front());
    return front != nullptr && front->fastbox && front->fastbox->spread_done > 0;
  }
  /// Fails fastbox receive `recv`: its spread message was withdrawn by its sender.
  static void fail_withdrawn(Pending& recv) noexcept;
  /// Nothing but the queued messages may go into the peer's ring now.
  static bool ring_taken(const Peer& peer) noexcept {
    return !peer.queued_sends.empty() || peer.withdrawal_queued;
  }
  /// Writes the peer's queued Withdrawal piece if there is room; true when none waits now.
  bool flush_withdrawal(Peer& peer) noexcept;
  /// Takes the pieces of `peer`'s incoming spread message that have arrived (into its receive,
  /// its unexpected message, or nowhere); completes the receive once all are in. True if any
  /// piece was taken.
  bool continue_incoming(Peer& peer) noexcept;
  /// `peer`'s incoming spread message goes nowhere from here (its receive or its unexpected
  /// message is gone); its remaining pieces are still taken from the ring.
  static void drop_incoming(Peer& peer) noexcept {
    if (peer.incoming) {
      peer.incoming->receive = Request{};
      peer.incoming->to_unexpected = false;
    }
  }
  /// Announces rendezvous send `handle` (`send`) in the peer's ring; false when it is full.
  bool write_rendezvous(Peer& peer, const Request& handle, const Pending& send);
  /// Rings the doorbell when `outcome` says the receiver sleeps; false when the ring was full.
  bool delivered(Peer& peer, Fastbox::Sender::Outcome outcome) noexcept;
  /// Tells `peer` its rendezvous send `cookie` is done with (error: errno of a failed read, 0
  /// otherwise), through the ring or, while that is full, queued; when queued, the receive
  /// `receive` (if any) is held in progress until the ack is written (Pending::ack_queued).
  void acknowledge(Peer& peer, std::uint64_t cookie, int error,
                   const Request& receive = Request{}) noexcept;
  /// Writes the peer's queued acks while its ring has room; true if any went.
  bool flush_acks(Peer& peer) noexcept;
  /// Rendezvous message `message`, matched to fastbox receive `handle` (`recv`): when
  /// `accepted`, made Ready (the copy and the ack follow in run_ready_copies), else refused (the
  /// sizes disagree) and acknowledged; the receive ends once its ack is written.
  void settle_rendezvous(Peer& peer, const Request& handle, Pending& recv, bool accepted,
                         const Fastbox::Rendezvous& message) noexcept;
  /// Forgets `peer`'s messages taken from its ring whose tag satisfies `dropped`, answering the
  /// rendezvous announcements among them (no receive will read them: their senders may have
  /// their buffers back).
  template <class Dropped>
  void drop_unexpected(Peer& peer, Dropped&& dropped) noexcept {
    std::erase_if(peer.unexpected, [&](const Unexpected& message) {
      if (!dropped(message.tag)) return false;
      if (!message.whole()) drop_incoming(peer);
      if (message.rendezvous) acknowledge(peer, message.rendezvous->cookie, 0);
      return true;
    });
  }
  /// Copies rendezvous message `message` from `peer`'s memory into `into` (`bytes`) and checks
  /// its seal after: 0, ECANCELED (the send was withdrawn, or the pid is no longer the
  /// sender's), or the errno of a failed read.
  /// Without the lock: touches nothing of the hub's but `peer`'s fixed fields.
  static int copy_rendezvous(const Peer& peer, void* into, std::size_t bytes,
                             const Fastbox::Rendezvous& message) noexcept;
  /// After rendezvous message `message` was copied into fastbox receive `handle` (`recv`) with
  /// result `error` (an errno, 0 when whole and sealed): fails the receive on an error and
  /// acknowledges the message.
  void finish_rendezvous(Peer& peer, const Request& handle, Pending& recv,
                         const Fastbox::Rendezvous& message, int error) noexcept;
  /// Makes the copies in ready_copies_, each without the lock, one after another, then wakes
  /// the threads waiting for them. Every call that may have matched a rendezvous message (post,
  /// test, a wait's round, cancellation, forget_tag_id) calls this after it lets go of the lock,
  /// so no accepted copy is left without a thread to make it. Takes the lock itself. Never
  /// throws.
  void run_ready_copies() noexcept;
  /// run_ready_copies() if a copy may be ready: the hint is exact for copies this thread made
  /// ready (its own store), and cheap to read in every wait round.
  void run_ready_copies_if_any() noexcept {
    if (ready_copies_hint_.load(std::memory_order_relaxed)) run_ready_copies();
  }
  /// Declared before a lock on mutex_ in a scope: runs the ready copies once the lock is let
  /// go, whether the scope ends normally or by an exception.
  class ReadyCopiesAfterUnlock {
   public:
    explicit ReadyCopiesAfterUnlock(UcxHub& hub) noexcept : hub_(hub) {}
    ReadyCopiesAfterUnlock(const ReadyCopiesAfterUnlock&) = delete;
    ReadyCopiesAfterUnlock& operator=(const ReadyCopiesAfterUnlock&) = delete;
    ~ReadyCopiesAfterUnlock() { hub_.run_ready_copies_if_any(); }

   private:
    UcxHub& hub_;
  };
  /// Withdraws the ready copies of the receives `withdrawn(pending)` selects (a cancelled
  /// communicator's, or all at teardown): each is acknowledged with ECANCELED, so its sender's
  /// send fails instead of waiting, and its receive may be released.
  template <class Withdrawn>
  void withdraw_ready_copies(Withdrawn&& withdrawn) noexcept {
    std::erase_if(ready_copies_, [&](const ReadyCopy& ready) {
      Pending* pending = requests_.find(ready.receive);
      if (pending == nullptr || pending->copy != Copy::Ready || !withdrawn(*pending)) return false;
      pending->copy = Copy::None;
      acknowledge(*peers_[static_cast<std::size_t>(pending->peer)], ready.message.cookie,
                  ECANCELED);
      return true;
    });
  }
  /// `peer`'s ack for one of this rank's rendezvous sends: completes (or fails) it, unless it
  /// was cancelled meanwhile.
  void complete_rendezvous_send(const Peer& peer, const Fastbox::Ack& ack) noexcept;
  /// Matches a ring message of `bytes`, stamped `large_before`, to fastbox receive `recv`; true
  /// when the message's bytes go to the receive's buffer (the caller copies an inline message,
  /// or makes a rendezvous copy Ready), false after recording a size disagreement.
  bool accept(Pending& recv, std::uint64_t bytes, std::uint32_t large_before);
  /// Takes every message waiting in each peer's ring and writes queued sends that now fit;
  /// true if anything moved.
  bool progress_fastboxes() noexcept;
  /// True if a peer's ring holds a message not taken yet.
  bool fastbox_has_incoming() const noexcept;
  /// Wakes `peer`'s process, asleep on its worker's event fd, with an empty active message.
  void ring_doorbell(Peer& peer) noexcept;
  /// Sends an ack to `peer` as an active message instead of through its ring, when UCX can
  /// take it at once; false otherwise (nothing sent).
  bool send_ack_message(Peer& peer, const Fastbox::Ack& ack) noexcept;
  /// The same-host peer that sent an active message whose header, `header_length` bytes at
  /// `header`, is copied into `wire` (a struct whose `rank` names the sender); nullptr (the
  /// message dropped) when the size or the rank is wrong.
  template <class Wire>
  Peer* message_sender(const void* header, std::size_t header_length, Wire& wire) noexcept;
  /// Unregisters the handlers below, whose argument is this hub (a constructor that throws:
  /// the endpoints' closing makes progress after the members they use are gone).
  void remove_message_handlers() noexcept;
  /// Withdraws the spread message half-written in `peer`'s ring by an active message, when UCX
  /// can take it at once (no room needed in the ring); false otherwise (nothing sent).
  bool send_withdrawal_message(Peer& peer) noexcept;
  static ucs_status_t on_withdrawal_message(void* arg, const void* header,
                                            std::size_t header_length, void* data,
                                            std::size_t length,
                                            const ucp_am_recv_param_t* param) noexcept;
  /// The handler of acks sent by send_ack_message (`arg`: the hub); runs inside the worker's
  /// progress, under the hub's lock (as on_withdrawal_message does).
  static ucs_status_t on_ack_message(void* arg, const void* header, std::size_t header_length,
                                     void* data, std::size_t length,
                                     const ucp_am_recv_param_t* param) noexcept;
  /// Before `pending` is released: whether UCX still has it (a send in flight, a receive being
  /// filled), and if so marks its peer, whose endpoint is then closed by force at teardown after
  /// a flush, which ends it if nothing else does (Peer::abandoned_send). With mutex_ held.
  bool note_abandoned(Pending& pending) noexcept;
  /// Takes `owner`'s requests out of the fastbox queues (cancellation).
  void forget_fastbox_requests(const void* owner) noexcept;

  /// Sleeps on the worker's event fd, the thread's own wake-up fd and the same-host peers'
  /// pidfds, at most until `until`, unless progress happened since `seen_epoch` or
  /// wake_sleepers() was called since `seen_wake_calls`. Takes the lock itself.
  void block_until(Deadline until, std::uint64_t seen_epoch, std::uint64_t seen_wake_calls);

  const int rank_;
  const int size_;
  unsigned host_cpus_ = 1;
  WaitPolicy policy_;
  PeerErrorHandling err_handling_;
  std::shared_ptr<TagIdPool> tag_ids_;
  mutable std::mutex mutex_;
  UcxWorker worker_;
  std::vector<std::unique_ptr<Peer>> peers_;
  RequestTable<Pending> requests_;
  /// Requests cancel_owned() gave up on while UCX still had them: a send UCX may still read
  /// (a rendezvous whose receiver comes late), a receive it may still be filling. Freeing one
  /// would not stop UCX; the memory must stay valid until it ends or the endpoints close.
  /// Each with the tag id of its communicator, whose failed ops' memory waits for it alone: a
  /// send that never ends (its receiver cancelled too) keeps only its own communicator's. Also
  /// the truncated receives draining a destroyed communicator's messages (no memory of theirs).
  struct Abandoned {
    UcxRequest request;
    std::uint32_t tag_id;
  };
  std::vector<Abandoned> abandoned_;
  /// The owners of that memory, as far as the communicators had them (retain_until_quiet).
  struct Retained {
    std::uint32_t tag_id;
    std::shared_ptr<void> keep;
  };
  std::vector<Retained> retained_;
  /// !abandoned_.empty(), readable without the lock (wait() reaps when set).
  std::atomic<bool> abandoned_hint_{false};
  /// A fastbox receive whose rendezvous copy is Ready, and the message it copies. Kept here, not
  /// in Pending: every small receive would carry (and build) it.
  struct ReadyCopy {
    Request receive;
    Fastbox::Rendezvous message;
  };
  /// In the order they became ready (guarded; stale handles are skipped).
  std::deque<ReadyCopy> ready_copies_;
  /// !ready_copies_.empty(), readable without the lock (run_ready_copies_if_any).
  std::atomic<bool> ready_copies_hint_{false};
  std::chrono::steady_clock::time_point last_liveness_check_{};
  /// Counts worker progress that did something (guarded), so a thread about to sleep can tell
  /// whether another thread completed its requests since it last looked.
  std::uint64_t progress_epoch_ = 0;
  /// While a fastbox request waits, test() makes UCX's progress and probe only every this many
  /// tests of it (FastboxPart::ring_only_rounds counts them).
  static constexpr std::uint32_t kRingRoundsPerFullRound = 8;
  /// The longest a thread sleeps while something waits for room in a peer's ring that the
  /// peer was not asked to report (Fastbox::Sender::RoomRequest::NotAsked).
  static constexpr std::chrono::milliseconds kRoomPoll{1};
  /// Threads blocked in block_until, each woken through its own descriptor.
  Sleepers sleepers_;
  /// Counts wake_sleepers() calls, so a thread about to sleep can tell it was asked to look
  /// again (at its interruption, its side work) since its last round.
  std::atomic<std::uint64_t> wake_calls_{0};
  Fastbox inbox_;  ///< this process's inbox; empty: no fastboxes
  /// A random value same-host peers read through this process's pid before they copy from its
  /// memory (PeerAddress::probe).
  const std::uint64_t probe_;
  std::vector<Peer*> fastbox_peers_;  ///< peers with a ring in either direction
};

/// For tests: while set, the acks and withdrawals that would go as active messages find UCX
/// refusing them, so the ring's own ways (an ack queued for room, a Withdrawal piece) run.
namespace testing {
void refuse_immediate_messages(bool refuse) noexcept;
/// Called by a thread about to sleep in a wait, after it counted itself asleep and before
/// poll(), and by it again once the sleep is over (poll() returned, and what follows under the
/// lock is done) (null: nothing); the longest nap instead of kMaxBlock (zero: kMaxBlock); and
/// whether sleepers go without an eventfd, as when the system refuses one. For tests that order
/// a sleep against wake-ups.
struct SleepHooks {
  void (*before_poll)() = nullptr;
  void (*after_sleep)() = nullptr;
  std::chrono::milliseconds longest_nap{0};
  bool refuse_eventfds = false;
};
void set_sleep_hooks(const SleepHooks& hooks) noexcept;
/// Adds `extra` to every timing this process's receiver half takes of `route` (a slower copy
/// out of the ring, or a slower rendezvous), so a test knows which way the pair's route choice
/// must go (ring_route_choice.hpp). Zero: as measured.
void slow_receive_timings(RingRouteChoice::Route route, std::chrono::nanoseconds extra) noexcept;
}  // namespace testing

}  // namespace cohort::transport::ucx
