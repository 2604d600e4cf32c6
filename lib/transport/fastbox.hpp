#pragma once

// Fastboxes: small point-to-point messages between two processes of one host, moved by loads and
// stores instead of through UCX.
//
// Why: a 4-byte send and receive through UCX's shared-memory transport costs a tag-matching
// request on each side plus UCX's own FIFO, about a third of a small sendrecv's time in a
// profile; Open MPI, with fastboxes of its own, makes the same exchange 2.5-3x faster. A fastbox is
// a ring of fixed-size slots that one sender writes and one receiver reads: the sender copies the
// message into the next slot and stamps it, the receiver sees the stamp, copies the message out and
// announces how far it has consumed.
//
// Layout: every process owns one segment (an anonymous memfd, mapped by its same-host peers
// through /proc/<pid>/fd/<fd>, like the shared arena), its inbox: a header line, then one ring
// per same-host rank, indexed by the sender's place among the host's ranks in world order. Ring:
// one line with the receiver's `consumed` count, one with its timings for the sender's route
// choice (Receiver::publish_timings), then kDepth slots of kSlotBytes. Message n
// (0, 1, ...) of a ring goes into slot n % kDepth and is stamped n + 1 once written; the sender
// rewrites a slot only once `consumed` passed its previous message, so a ring holds at most
// kDepth slots the receiver has not taken yet.
//
// A message carries its full tag, its size, and how many messages with its tag its sender sent
// before it through UCX (the owner, UcxHub, keeps that count). A slot holds one of three kinds:
// - Inline: the message itself, at most kInlineBytes;
// - Rendezvous: a large message's announcement: where its bytes lie in the sender's memory. The
//   receiver copies them straight from there (process_vm_readv) into its receive's buffer,
//   checks the send's seal after the copy (a send cancelled meanwhile fails the receive; see
//   send_seal.hpp), and answers with
// - Ack: through the ring the other way, naming the send (its cookie), after which the sender
//   may reuse its buffer.
// - Spread: a middle-sized message copied into consecutive slots, each stamped as it is
//   written, the first one carrying the size and the others the time it was posted (the
//   owner's route choice times it; ring_route_choice.hpp); a message larger than the free slots
//   goes in parts, as the receiver frees them. The receiver copies the pieces out as they come. A
//   sender that gives up on one it has begun ends it with a Withdrawal piece, or its owner
//   tells the receiver's owner where its pieces end (take_spread's `end`). Two copies through
//   memory both processes map beat one copy out of the sender's memory (process_vm_readv) up to a
//   few hundred KiB: the kernel pins each 4 KiB page of the sender's buffer before it copies, and
//   pinning costs more than the copy there (see bench/PERFORMANCE-LOG.md, "Middle-sized send/recv
//   spread over the ring"); not on every host, so the owner measures which way a pair's messages
//   of each size go ("Spread or rendezvous, measured per pair").
// The owner decides which messages go which way; the rings only carry them.
//
// Waking: a receiver about to sleep counts itself in its inbox header's `sleepers`; a sender
// that finds it non-zero after stamping tells its owner (try_send's answer), which rings the
// receiver's doorbell through UCX so its event fd wakes it. Both sides use sequentially
// consistent operations for that pair (a Spread message: release stamps, then one sequentially
// consistent fence before the sleepers' load), so either the sender sees the sleeper or the
// receiver sees the message before it sleeps. The other way, a writer about to sleep because
// its ring is full asks for room in the ring's header (want_room: the receiver's `consumed`
// count from which its smallest refused write fits); a receiver that pops checks for such a
// request once per batch of pops (room_made) and, when it has made that room, tells its owner,
// which rings the writer's doorbell. The same pairing (the writer's request and look at
// `consumed`, the receiver's pops and its look at the request) makes sure one of the two sees
// the other; the barrier between the receiver's pops and its look is made by the writer, with
// membarrier(), as it goes to sleep (rare), not by the receiver after every batch (often).
//
// Not thread-safe: the owner (UcxHub) serialises every call under its mutex. Across processes,
// each ring has exactly one writing and one reading process.

#include "transport/tag.hpp"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <utility>

#include <sys/types.h>

namespace cohort::transport {

struct FastboxSlot;

class Fastbox {
  struct Header;
  struct Ring;

 public:
  /// Slots per ring: how many messages a sender may have in the ring before the receiver takes
  /// them. UCX's shared-memory FIFO holds 64 as well, so a program that relied on that much
  /// buffering still runs.
  static constexpr std::uint64_t kDepth = 64;
  /// A slot: its stamp and header, then up to kInlineBytes of message, in 65 cache lines. Only
  /// the lines a message fills are touched, so a small message costs what it did in the 1 KiB
  /// slots before; with those, 2 and 4 KiB messages took UCX's path (see bench/PERFORMANCE-LOG.md).
  /// Messages spread over several slots ran slower than UCX's shared-memory path at 4-8 KiB.
  static constexpr std::size_t kSlotBytes = 4096 + 64;
  /// The largest message a ring carries (the slot less its stamp and header): 4136 bytes.
  static constexpr std::size_t kInlineBytes = kSlotBytes - 24;

  /// A Spread message as large as every slot of an empty ring.
  static constexpr std::size_t kSpreadBytes = kDepth * kInlineBytes;
  /// Spread messages must be smaller than this (their size shares a word with marks).
  static constexpr std::size_t kSpreadLimit = std::size_t{1} << 28;
  /// Size classes a ring carries its receiver's timings for (see Receiver::publish_timings).
  static constexpr int kTimedClasses = 4;

  enum class Kind : std::uint8_t { Inline, Rendezvous, Ack, Spread };
  struct Message {
    Tag tag = 0;
    std::uint64_t bytes = 0;
    /// Messages with this tag the sender sent to this receiver through UCX (too large for the
    /// ring) before this one; the owner's to keep and read (UcxHub matches sizes with it).
    std::uint32_t large_before = 0;
    Kind kind = Kind::Inline;
    /// When the sender posted it (its steady clock, in ns), for the route choice
    /// (ring_route_choice.hpp). Spread messages carry it in their pieces after the first
    /// (take_spread reports it), rendezvous ones in their body; 0 where not needed.
    std::uint64_t sent_at = 0;
  };
  /// A Rendezvous message's body.
  struct Rendezvous {
    std::uint64_t address = 0;  ///< where the message's bytes lie in the sender's memory
    std::uint64_t cookie = 0;   ///< the sender's name for the send, returned in the Ack
    /// Where the send's seal lies (its address in the sender, a word of its seal pool:
    /// SendSeal::location), and the value it holds while the buffer is the sender's to give
    /// (see send_seal.hpp).
    std::uint64_t seal_at = 0;
    std::uint64_t seal = 0;
    /// The message's last 8 bytes (all of them when shorter): the receiver's single read puts
    /// the seal there, then these back (process_memory.hpp's read_sealed_process_memory).
    std::uint64_t tail = 0;
    std::uint64_t sent_at = 0;  ///< Message::sent_at
  };
  /// An Ack message's body (its Message has no tag and no bytes).
  struct Ack {
    std::uint64_t cookie = 0;  ///< Rendezvous::cookie
    std::int32_t error = 0;    ///< 0: the receiver is done with the sender's buffer; else errno
  };

  /// An empty fastbox: no segment.
  Fastbox() = default;
  /// Step one of this process's inbox: its memfd, not sized yet (peers learn the descriptor
  /// before anyone knows how many same-host ranks there are). -1 (logged) when the kernel
  /// refuses.
  static int create_inbox_fd() noexcept;
  /// Step two: sizes the memfd `fd` for `rings` rings (one per same-host rank) and maps it. Owns
  /// `fd` from here on; empty (logged) when that fails.
  static Fastbox map_inbox(int fd, int rings);
  /// Maps process `pid`'s inbox of `rings` rings through /proc/<pid>/fd/<fd>; empty (logged)
  /// when that fails or the segment is not that large yet.
  static Fastbox map_peer_inbox(pid_t pid, int fd, int rings);

  ~Fastbox();
  Fastbox(Fastbox&& other) noexcept;
  Fastbox& operator=(Fastbox&& other) noexcept;
  Fastbox(const Fastbox&) = delete;
  Fastbox& operator=(const Fastbox&) = delete;

  explicit operator bool() const noexcept { return base_ != nullptr; }
  /// The segment's descriptor in this process (inboxes only; -1 otherwise).
  int fd() const noexcept { return fd_; }

  /// The writing end of ring `index` of a mapped peer inbox; the sending process keeps one per
  /// peer.
  class Sender {
   public:
    Sender() = default;
    enum class Outcome {
      Full,           ///< nothing written: the receiver has not taken the slots it needs
      Sent,           ///< in the ring
      SentToSleeper,  ///< in the ring, and the receiver is asleep: ring its doorbell
    };
    /// Copies the message (`message.bytes` <= kInlineBytes bytes at `data`) into the next slot
    /// and stamps it.
    Outcome try_send(const Message& message, const void* data) noexcept;
    /// Announces a message of `message.bytes` (any size) that stays at `body.address` in this
    /// process until the receiver's Ack.
    Outcome try_send_rendezvous(const Message& message, const Rendezvous& body) noexcept;
    Outcome try_send_ack(const Ack& body) noexcept;
    /// Copies the pieces of the message (`message.bytes` < kSpreadLimit bytes at `data`) from
    /// byte `done` on into the free slots, stamping each as it is written, and advances `done`
    /// past them (to `message.bytes` once all are in). The piece at byte 0 carries the size.
    /// Full: no slot was free, nothing written.
    Outcome try_send_spread(const Message& message, const void* data, std::uint64_t& done) noexcept;
    /// Ends a Spread message whose first pieces are in the ring and whose rest will not follow
    /// (its send was cancelled); the receiver's take_spread reports it withdrawn. Full: no room.
    Outcome try_send_withdrawal() noexcept;
    /// Slots written so far. Told to the receiver some other way, it ends a Spread message
    /// withdrawn without a Withdrawal piece (take_spread's `end`).
    std::uint64_t written() const noexcept { return sent_; }
    enum class RoomRequest {
      Fits,      ///< the write refused fits now: look again instead of sleeping
      Asked,     ///< the receiver will report when it does (Receiver::room_made)
      NotAsked,  ///< nothing refused since forget_refusals(), or no barrier: poll
    };
    /// Before sleeping on a refusal (Full): asks the receiver to report once the smallest write
    /// refused since the last one that went in (or since forget_refusals()) would fit.
    RoomRequest want_room() noexcept;
    /// The receiver's timings for size class `size_class` (< kTimedClasses), spread and
    /// rendezvous (Receiver::publish_timings), once it published them.
    std::optional<std::pair<std::uint32_t, std::uint32_t>> receiver_timings(
        int size_class) const noexcept;
    /// Forgets the refusals so far; the owner calls it before it tries its queued writes
    /// again, so a refusal of a write that went another way since (or was cancelled) is not
    /// asked for.
    void forget_refusals() noexcept { refused_ = 0; }
    bool attached() const noexcept { return ring_ != nullptr; }

   private:
    friend class Fastbox;
    /// The next slot, or nullptr when the ring is full.
    FastboxSlot* claim() noexcept;
    /// Stamps the slot claim() returned.
    Outcome publish(FastboxSlot& slot) noexcept;
    /// Full, after a write that wanted `slots` free slots found fewer.
    Outcome refuse(std::uint64_t slots) noexcept;
    Ring* ring_ = nullptr;
    Header* header_ = nullptr;
    std::uint64_t sent_ = 0;
    std::uint64_t consumed_seen_ = 0;  ///< the receiver's `consumed` as last read
    /// The fewest free slots a write refused since the last one that went in wanted; 0: none.
    std::uint64_t refused_ = 0;
  };
  /// The reading end of ring `index` of this process's inbox.
  class Receiver {
   public:
    Receiver() = default;
    /// The oldest message not yet taken, if one arrived.
    std::optional<Message> peek() const noexcept;
    /// Copies the bytes of the Inline message peek() returned to `out`.
    void read(const Message& message, void* out) const noexcept;
    /// The body of the Rendezvous or Ack message peek() returned.
    Rendezvous rendezvous() const noexcept;
    Ack ack() const noexcept;
    struct Taken {
      std::uint64_t done = 0;  ///< the message's bytes taken so far
      bool withdrawn = false;  ///< its sender withdrew it: no more pieces come
      /// Message::sent_at, once a piece after the first was taken by this call; else 0.
      std::uint64_t sent_at = 0;
    };
    /// For the Spread message of `bytes` whose first slot peek() returned: copies the pieces
    /// that have arrived, from byte `done` on, to `out` + that offset (`out` null: drops them),
    /// and pops each slot read. The message is over when `done` reaches `bytes` or it was
    /// withdrawn (by a Withdrawal piece, or, when `end` is given, once every slot before slot
    /// number `end`, the sender's written() when it withdrew it, is taken); the next peek()
    /// then looks at the message after it. A slot that is neither a piece nor a Withdrawal
    /// (the next message, of a sender that withdrew this one outside the ring) is left where
    /// it is: the call returns as when no more pieces have come, until `end` is given.
    Taken take_spread(std::uint64_t bytes, std::byte* out, std::uint64_t done,
                      std::uint64_t end = UINT64_MAX) noexcept;
    /// Tells the sender this side's timings for size class `size_class` (< kTimedClasses): the
    /// median time its receives of spread and of rendezvous messages took, in ns, for the
    /// sender's choice between the two (ring_route_choice.hpp). Once per class.
    void publish_timings(int size_class, std::uint32_t spread, std::uint32_t rendezvous) noexcept;
    /// Lets the sender reuse the slot of the message peek() returned.
    void pop() noexcept;
    /// Slots taken so far (the sender's written() counts the same way).
    std::uint64_t taken() const noexcept { return received_; }
    /// After a batch of pops: true, once, when the sender asked for room (Sender::want_room)
    /// that the pops have made; its owner then rings the sender's doorbell.
    bool room_made() noexcept;
    bool attached() const noexcept { return ring_ != nullptr; }

   private:
    friend class Fastbox;
    Ring* ring_ = nullptr;
    std::uint64_t received_ = 0;
    bool popped_ = false;  ///< pop() since the last room_made()
    /// This process is registered for the senders' membarrier() (read once, at receiver()).
    bool registered_ = false;
  };

  Sender sender(int index) const noexcept;
  Receiver receiver(int index) const noexcept;

  /// For an inbox: count this process as sleeping (true) or awake again (false). See above.
  void set_sleeping(bool sleeping) noexcept;

  /// Segment bytes for `rings` rings.
  static std::size_t bytes_for(int rings) noexcept;

 private:
  Fastbox(void* base, std::size_t bytes, int rings, int fd) noexcept
      : base_(base), bytes_(bytes), rings_(rings), fd_(fd) {}
  void reset() noexcept;
  Header* header() const noexcept { return static_cast<Header*>(base_); }
  Ring* ring(int index) const noexcept;

  void* base_ = nullptr;
  std::size_t bytes_ = 0;
  int rings_ = 0;
  int fd_ = -1;  ///< the inbox's memfd (inboxes only)
};

}  // namespace cohort::transport
