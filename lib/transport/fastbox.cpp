#include "transport/fastbox.hpp"

#include "core/check.hpp"
#include "transport/shared_segment.hpp"

#include <linux/membarrier.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <utility>

namespace cohort::transport {

static_assert(std::atomic<std::uint64_t>::is_always_lock_free &&
                  std::atomic<std::uint32_t>::is_always_lock_free,
              "counters shared between processes must be lock-free atomics");

struct alignas(64) Fastbox::Header {
  std::atomic<std::uint32_t> sleepers{0};  ///< threads of the owner about to sleep or asleep
};

struct alignas(64) FastboxSlot {
  std::atomic<std::uint64_t> stamp{0};  ///< message number + 1 once the slot holds it
  std::uint64_t tag = 0;
  /// An Inline message's size; the other kinds set a mark bit instead and keep their size in
  /// the body (a rendezvous message may exceed 32 bits), so an Inline slot spends nothing on it.
  std::uint32_t bytes = 0;
  std::uint32_t large_before = 0;  ///< Message::large_before
  std::byte data[Fastbox::kInlineBytes];
};
static_assert(sizeof(FastboxSlot) == Fastbox::kSlotBytes);

namespace {

/// What MEMBARRIER_CMD_QUERY said in this process: the commands the kernel offers, or -1 when
/// the call failed (no membarrier at all, or this process's seccomp filter refused it, which
/// says nothing about what a receiver's process could register).
long barrier_commands() noexcept {
  static const long supported = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
  return supported;
}

/// Whether the kernel offers MEMBARRIER_CMD_GLOBAL_EXPEDITED (Linux 4.16 on, unless configured
/// out) to this process.
bool barriers_offered() noexcept {
  const long supported = barrier_commands();
  return supported >= 0 && (supported & MEMBARRIER_CMD_GLOBAL_EXPEDITED) != 0;
}

/// Whether this process is registered for it: a sender's membarrier() then runs a full barrier
/// on every core that runs one of its threads, which stands in for the barrier a receiver would
/// otherwise make after its pops (room_made()).
bool registered_for_barriers() noexcept {
  static const bool registered =
      barriers_offered() &&
      syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED, 0, 0) == 0;
  return registered;
}

/// A full barrier on every core running a thread of a registered process. True without one
/// where the kernel answered that it does not offer it (no process on it can have registered,
/// so every receiver makes its own barrier); false when the call is refused, or the query was
/// (a receiver's process, under another seccomp filter, may have registered and then misses a
/// request: the sender must not sleep long).
bool barrier_on_all_receivers() noexcept {
  if (barrier_commands() < 0) return false;
  return !barriers_offered() || syscall(SYS_membarrier, MEMBARRIER_CMD_GLOBAL_EXPEDITED, 0, 0) == 0;
}

/// glibc's memcpy for a spread message's pieces, not the compiler's expansion: knowing a piece
/// is at most kInlineBytes, GCC copies it with `rep movsq`, and the exchange took longer.
void* (*const volatile copy_piece)(void*, const void*, std::size_t) noexcept = std::memcpy;

constexpr std::uint32_t kRendezvousMark = 1u << 31;
constexpr std::uint32_t kAckMark = 1u << 30;
/// A Spread message's slots: the first holds the mark and the message's size, the others the
/// mark alone; a Withdrawal piece the mark and kWithdrawnMark.
constexpr std::uint32_t kSpreadMark = 1u << 29;
constexpr std::uint32_t kWithdrawnMark = 1u << 28;
static_assert(Fastbox::kInlineBytes < kWithdrawnMark && Fastbox::kSpreadLimit == kWithdrawnMark);

/// A Rendezvous slot's body.
struct RendezvousBody {
  std::uint64_t bytes;
  std::uint64_t address;
  std::uint64_t cookie;
  std::uint64_t seal_at;
  std::uint64_t seal;
  std::uint64_t tail;
  std::uint64_t sent_at;
};
static_assert(sizeof(RendezvousBody) <= Fastbox::kInlineBytes &&
              sizeof(Fastbox::Ack) <= Fastbox::kInlineBytes);

}  // namespace

struct alignas(64) Fastbox::Ring {
  /// Messages the receiver has taken. On a line the sender reads only when the ring looks full,
  /// so the receiver's stores rarely move it.
  alignas(64) std::atomic<std::uint64_t> consumed{0};
  /// Set by a sender about to sleep for room: the `consumed` count from which its write fits
  /// (never 0 when set: the ring was full for it). The receiver clears it when it wakes it.
  std::atomic<std::uint64_t> room_wanted{0};
  /// The receiver's timings for the sender's route choice (ring_route_choice.hpp), per class:
  /// the median time its receives of spread and of rendezvous messages took (from the later of
  /// the send's and the receive's posting to the last byte in), in ns, valid once the class's
  /// bit in `timed` is set. Written once per class; on a line of its own, which the
  /// sender reads only until it has its verdicts.
  struct alignas(64) Timings {
    std::atomic<std::uint32_t> timed{0};
    std::atomic<std::uint32_t> spread[kTimedClasses]{};
    std::atomic<std::uint32_t> rendezvous[kTimedClasses]{};
  } timings;
  FastboxSlot slots[kDepth];
};

void Fastbox::Receiver::publish_timings(int size_class, std::uint32_t spread,
                                        std::uint32_t rendezvous) noexcept {
  COHORT_CHECK(size_class >= 0 && size_class < kTimedClasses);
  const auto c = static_cast<std::size_t>(size_class);
  ring_->timings.spread[c].store(spread, std::memory_order_relaxed);
  ring_->timings.rendezvous[c].store(rendezvous, std::memory_order_relaxed);
  ring_->timings.timed.fetch_or(1u << c, std::memory_order_release);
}

std::optional<std::pair<std::uint32_t, std::uint32_t>> Fastbox::Sender::receiver_timings(
    int size_class) const noexcept {
  COHORT_CHECK(size_class >= 0 && size_class < kTimedClasses);
  const auto c = static_cast<std::size_t>(size_class);
  if ((ring_->timings.timed.load(std::memory_order_acquire) & (1u << c)) == 0) return std::nullopt;
  return std::pair{ring_->timings.spread[c].load(std::memory_order_relaxed),
                   ring_->timings.rendezvous[c].load(std::memory_order_relaxed)};
}

std::size_t Fastbox::bytes_for(int rings) noexcept {
  return sizeof(Header) + static_cast<std::size_t>(rings) * sizeof(Ring);
}

Fastbox::Ring* Fastbox::ring(int index) const noexcept {
  COHORT_CHECK(base_ != nullptr && index >= 0 && index < rings_);
  return reinterpret_cast<Ring*>(static_cast<std::byte*>(base_) + sizeof(Header) +
                                 static_cast<std::size_t>(index) * sizeof(Ring));
}

int Fastbox::create_inbox_fd() noexcept {
  return shared_segment::create("cohort-fastbox", "fastbox");
}

Fastbox Fastbox::map_inbox(int fd, int rings) {
  // Before any peer can write here, so no sender's barrier comes too early for this receiver.
  registered_for_barriers();
  const std::size_t bytes = bytes_for(rings);
  void* base = shared_segment::size_and_map(fd, bytes, "fastbox");
  if (base == nullptr) {
    close(fd);
    return {};
  }
  return Fastbox(base, bytes, rings, fd);
}

Fastbox Fastbox::map_peer_inbox(pid_t pid, int fd, int rings) {
  const std::size_t bytes = bytes_for(rings);
  void* base = shared_segment::map_existing(shared_segment::proc_path(pid, fd), bytes, "fastbox");
  if (base == nullptr) return {};
  return Fastbox(base, bytes, rings, -1);
}

Fastbox::~Fastbox() {
  reset();
}

Fastbox::Fastbox(Fastbox&& other) noexcept
    : base_(std::exchange(other.base_, nullptr)),
      bytes_(other.bytes_),
      rings_(other.rings_),
      fd_(std::exchange(other.fd_, -1)) {}

Fastbox& Fastbox::operator=(Fastbox&& other) noexcept {
  if (this != &other) {
    reset();
    base_ = std::exchange(other.base_, nullptr);
    bytes_ = other.bytes_;
    rings_ = other.rings_;
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

void Fastbox::reset() noexcept {
  if (base_ != nullptr) munmap(base_, bytes_);
  if (fd_ >= 0) close(fd_);
  base_ = nullptr;
  fd_ = -1;
}

Fastbox::Sender Fastbox::sender(int index) const noexcept {
  Sender sender;
  sender.ring_ = ring(index);
  sender.header_ = header();
  return sender;
}

Fastbox::Receiver Fastbox::receiver(int index) const noexcept {
  Receiver receiver;
  receiver.ring_ = ring(index);
  receiver.registered_ = registered_for_barriers();
  return receiver;
}

void Fastbox::set_sleeping(bool sleeping) noexcept {
  if (sleeping) {
    header()->sleepers.fetch_add(1, std::memory_order_seq_cst);
  } else {
    header()->sleepers.fetch_sub(1, std::memory_order_seq_cst);
  }
}

FastboxSlot* Fastbox::Sender::claim() noexcept {
  if (sent_ - consumed_seen_ >= kDepth) {
    consumed_seen_ = ring_->consumed.load(std::memory_order_acquire);
    if (sent_ - consumed_seen_ >= kDepth) return nullptr;
  }
  return &ring_->slots[sent_ % kDepth];
}

Fastbox::Sender::Outcome Fastbox::Sender::refuse(std::uint64_t slots) noexcept {
  refused_ = refused_ == 0 ? slots : std::min(refused_, slots);
  return Outcome::Full;
}

Fastbox::Sender::RoomRequest Fastbox::Sender::want_room() noexcept {
  if (refused_ == 0) return RoomRequest::NotAsked;
  // Above `consumed` as last read (the write was refused), so never 0.
  const std::uint64_t wanted_at = sent_ + refused_ - kDepth;
  // The request, then a barrier on every core that runs a receiver whose room_made() looks at
  // it without one of its own (see there), then the look at `consumed`: either this sees the
  // receiver's pops or the receiver sees the request. Sequentially consistent for a receiver
  // that fences itself.
  ring_->room_wanted.store(wanted_at, std::memory_order_seq_cst);
  const bool barrier = barrier_on_all_receivers();
  consumed_seen_ = ring_->consumed.load(std::memory_order_seq_cst);
  if (consumed_seen_ >= wanted_at) return RoomRequest::Fits;
  return barrier ? RoomRequest::Asked : RoomRequest::NotAsked;
}

Fastbox::Sender::Outcome Fastbox::Sender::publish(FastboxSlot& slot) noexcept {
  refused_ = 0;
  ++sent_;
  // Sequentially consistent, with the load after it: against the receiver's set_sleeping and
  // peek, either this sees the sleeper or the receiver sees the message (see the header).
  slot.stamp.store(sent_, std::memory_order_seq_cst);
  return header_->sleepers.load(std::memory_order_seq_cst) != 0 ? Outcome::SentToSleeper
                                                                : Outcome::Sent;
}

Fastbox::Sender::Outcome Fastbox::Sender::try_send(const Message& message,
                                                   const void* data) noexcept {
  const std::uint64_t bytes = message.bytes;
  COHORT_CHECK(bytes <= kInlineBytes);
  FastboxSlot* slot = claim();
  if (slot == nullptr) return refuse(1);
  slot->tag = message.tag;
  slot->bytes = static_cast<std::uint32_t>(bytes);
  slot->large_before = message.large_before;
  if (bytes > 0) std::memcpy(slot->data, data, bytes);
  return publish(*slot);
}

Fastbox::Sender::Outcome Fastbox::Sender::try_send_rendezvous(const Message& message,
                                                              const Rendezvous& body) noexcept {
  FastboxSlot* slot = claim();
  if (slot == nullptr) return refuse(1);
  slot->tag = message.tag;
  slot->bytes = kRendezvousMark;
  slot->large_before = message.large_before;
  const RendezvousBody wire{message.bytes, body.address, body.cookie,    body.seal_at,
                            body.seal,     body.tail,    message.sent_at};
  std::memcpy(slot->data, &wire, sizeof wire);
  return publish(*slot);
}

Fastbox::Sender::Outcome Fastbox::Sender::try_send_ack(const Ack& body) noexcept {
  FastboxSlot* slot = claim();
  if (slot == nullptr) return refuse(1);
  slot->tag = 0;
  slot->bytes = kAckMark;
  slot->large_before = 0;
  std::memcpy(slot->data, &body, sizeof body);
  return publish(*slot);
}

Fastbox::Sender::Outcome Fastbox::Sender::try_send_spread(const Message& message, const void* data,
                                                          std::uint64_t& done) noexcept {
  const std::uint64_t bytes = message.bytes;
  COHORT_CHECK(bytes < kSpreadLimit && done <= bytes);
  const auto* from = static_cast<const std::byte*>(data);
  // What fits in the ring goes whole, when it has room for all of it; a larger message once a
  // quarter of the ring is free, then as much as there is room for. Pieces as slots free up one
  // or two at a time moved the ring's lines between the cores for each: a 256 KiB exchange
  // took 15.0 us instead of 12.4.
  const std::uint64_t left =
      std::max<std::uint64_t>((bytes - done + kInlineBytes - 1) / kInlineBytes, 1);
  const std::uint64_t wanted = left <= kDepth ? left : kDepth / 4;
  if (kDepth - (sent_ - consumed_seen_) < wanted) {
    consumed_seen_ = ring_->consumed.load(std::memory_order_acquire);
    if (kDepth - (sent_ - consumed_seen_) < wanted) return refuse(wanted);
  }
  bool wrote = false;
  do {
    FastboxSlot* slot = claim();
    if (slot == nullptr) break;
    const std::uint64_t length = std::min<std::uint64_t>(kInlineBytes, bytes - done);
    // A piece after the first needs no tag: its word carries the message's sent_at instead.
    slot->tag = done == 0 ? message.tag : message.sent_at;
    slot->bytes = kSpreadMark | static_cast<std::uint32_t>(done == 0 ? bytes : 0);
    slot->large_before = message.large_before;
    copy_piece(slot->data, from + done, length);
    done += length;
    // Each piece as it is written, so the receiver copies the first ones out meanwhile. A
    // release store, not publish()'s: a sequentially consistent one per piece waited for every
    // store of the piece to leave the core (61% of a 128 KiB exchange's samples on that store).
    slot->stamp.store(++sent_, std::memory_order_release);
    wrote = true;
  } while (done < bytes);
  if (!wrote) return refuse(1);
  refused_ = 0;
  // One fence for all the pieces: against the receiver's set_sleeping and peek, either this sees
  // the sleeper or the receiver sees every piece stamped before it (see the header).
  std::atomic_thread_fence(std::memory_order_seq_cst);
  return header_->sleepers.load(std::memory_order_seq_cst) != 0 ? Outcome::SentToSleeper
                                                                : Outcome::Sent;
}

Fastbox::Sender::Outcome Fastbox::Sender::try_send_withdrawal() noexcept {
  FastboxSlot* slot = claim();
  if (slot == nullptr) return refuse(1);
  slot->tag = 0;
  slot->bytes = kSpreadMark | kWithdrawnMark;
  slot->large_before = 0;
  return publish(*slot);
}

Fastbox::Receiver::Taken Fastbox::Receiver::take_spread(std::uint64_t bytes, std::byte* out,
                                                        std::uint64_t done,
                                                        std::uint64_t end) noexcept {
  std::uint64_t sent_at = 0;
  do {
    // Withdrawn with its slots up to `end`: what follows is the next message's.
    if (received_ >= end) return Taken{done, true};
    const FastboxSlot& slot = ring_->slots[received_ % kDepth];
    if (slot.stamp.load(std::memory_order_acquire) != received_ + 1) break;
    // Only after the first piece: a withdrawn message's first piece is its own. After its
    // first, only the message's own pieces or its Withdrawal come (the owner holds everything
    // else back), unless the sender withdrew it outside the ring: then the next message's
    // first slot may be here before the owner learns `end`. Left for then.
    if (done > 0) {
      if (slot.bytes == (kSpreadMark | kWithdrawnMark)) {
        pop();
        return Taken{done, true};
      }
      if (slot.bytes != kSpreadMark) break;
    }
    if (done > 0) sent_at = slot.tag;
    const std::uint64_t length = std::min<std::uint64_t>(kInlineBytes, bytes - done);
    if (out != nullptr) copy_piece(out + done, slot.data, length);
    done += length;
    pop();
  } while (done < bytes);
  return Taken{done, false, sent_at};
}

std::optional<Fastbox::Message> Fastbox::Receiver::peek() const noexcept {
  const FastboxSlot& slot = ring_->slots[received_ % kDepth];
  if (slot.stamp.load(std::memory_order_seq_cst) != received_ + 1) return std::nullopt;
  if (slot.bytes < kSpreadMark) [[likely]]
    return Message{slot.tag, slot.bytes, slot.large_before, Kind::Inline};
  if (slot.bytes < kAckMark)
    return Message{slot.tag, slot.bytes & ~kSpreadMark, slot.large_before, Kind::Spread};
  if (slot.bytes == kAckMark) return Message{0, 0, 0, Kind::Ack};
  RendezvousBody wire;
  std::memcpy(&wire, slot.data, sizeof wire);
  return Message{slot.tag, wire.bytes, slot.large_before, Kind::Rendezvous};
}

Fastbox::Rendezvous Fastbox::Receiver::rendezvous() const noexcept {
  RendezvousBody wire;
  std::memcpy(&wire, ring_->slots[received_ % kDepth].data, sizeof wire);
  return Rendezvous{wire.address, wire.cookie, wire.seal_at, wire.seal, wire.tail, wire.sent_at};
}

Fastbox::Ack Fastbox::Receiver::ack() const noexcept {
  Ack body;
  std::memcpy(&body, ring_->slots[received_ % kDepth].data, sizeof body);
  return body;
}

void Fastbox::Receiver::read(const Message& message, void* out) const noexcept {
  COHORT_CHECK(message.kind == Kind::Inline);
  if (message.bytes == 0) return;
  std::memcpy(out, ring_->slots[received_ % kDepth].data, message.bytes);
}

void Fastbox::Receiver::pop() noexcept {
  ++received_;
  ring_->consumed.store(received_, std::memory_order_release);
  popped_ = true;
}

bool Fastbox::Receiver::room_made() noexcept {
  if (!popped_) return false;
  popped_ = false;
  // After the batch's pops, the look at the sender's request: against want_room(), either it
  // sees these pops or this sees its request. A receiver registered for membarrier() needs no
  // barrier here (the sender's membarrier() puts one on this core); any barrier here, even an
  // exchange of the count, cost an 8-byte exchange 4% (10 ns). Unregistered, the count once
  // more, sequentially consistent.
  if (registered_) {
    std::atomic_signal_fence(std::memory_order_seq_cst);  // the compiler keeps the order
  } else {
    ring_->consumed.exchange(received_, std::memory_order_seq_cst);
  }
  std::uint64_t wanted_at = ring_->room_wanted.load(std::memory_order_seq_cst);
  while (wanted_at != 0 && received_ >= wanted_at) {
    // Only the request answered: a newer one (the sender woke meanwhile and asked again) stays.
    if (ring_->room_wanted.compare_exchange_weak(wanted_at, 0, std::memory_order_relaxed))
      return true;
  }
  return false;
}

}  // namespace cohort::transport
