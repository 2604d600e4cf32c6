#pragma once

// Which way a middle-sized point-to-point message between two ranks of one host goes, measured
// per pair of ranks and size class: spread over the receiver's fastbox ring (the sender copies
// it into shared slots, the receiver copies it out: two copies, no round trip), or by rendezvous
// (the receiver copies it straight out of the sender's memory with process_vm_readv: one copy,
// but the kernel pins every page of it first, and the send waits for its receive).
//
// Why measured: which one is faster depends on the host more than on the size. On the
// 2026-11-28 host, spread messages of 64-256 KiB were 1.5-1.9x faster than the rendezvous; on
// the 2026-12-02 host they were slower at every size from 64 to 512 KiB (1.2-8x), with reused
// and with fresh input alike: moving the ring's lines between the two cores cost several times
// more there (bench/PERFORMANCE-LOG.md, "Spread or rendezvous, measured per pair"). No fixed
// limit is right on both.
//
// How: the sender decides, since the receiver takes either kind as it comes. Until a class has a
// verdict, the sender alternates the two ways, spread first. The receiver times its part of each
// message: for a spread message that met its receive, the copies out of the ring (not the waits
// for pieces); for a rendezvous, the process_vm_readv. Once it holds kTrials of each it publishes
// their medians on its ring's line for that sender (Fastbox::Receiver::publish_timings). The
// sender, holding kTrials timings of its own copies into the ring, then compares: a spread costs
// its copy in plus the receiver's copy out, a rendezvous the receiver's copy. That is the work
// each way puts on the two cores; in an exchange (sendrecv, halo) each core makes both copies of
// a spread and one of a rendezvous.
//
// The verdict stands for the life of the pair. A class still without one after kMaxTrials sends
// (its receives came too late to be timed, or the receiver does not measure) keeps the spread.
//
// Not thread-safe: the owner (UcxHub) calls it under its mutex. Each rank keeps one per peer:
// its sender half for the messages it sends there, its receiver half for those it receives.

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>

namespace cohort::transport {

class RingRouteChoice {
 public:
  enum class Route : std::uint8_t { Spread, Rendezvous };
  /// Size classes, by powers of two: (32, 64] KiB, (64, 128], (128, 256], (256, 512].
  static constexpr int kClasses = 4;
  static constexpr std::size_t kSmallest = 32 * 1024;  ///< exclusive
  static constexpr std::size_t kLargest = 512 * 1024;  ///< inclusive
  /// Timings of each way a median is taken over, on each side.
  static constexpr int kTrials = 8;
  /// Sends of a class after which, without a verdict, it stays spread.
  static constexpr int kMaxTrials = 64;

  /// The class of a message of `bytes`; -1 when outside (kSmallest, kLargest].
  static int class_of(std::size_t bytes) noexcept;

  /// The receiver's medians for one class, as it publishes them, in nanoseconds.
  struct ReceiverTimings {
    std::uint32_t spread_copy_out = 0;
    std::uint32_t rendezvous_copy = 0;
  };

  // The sender's half.

  /// Whether class `c` has a verdict, or has run out of trials.
  bool settled(int c) const noexcept;
  /// Gives class `c` its verdict from the receiver's medians, once this side holds kTrials
  /// timings of its own; true if it did now.
  bool decide(int c, const ReceiverTimings& theirs) noexcept;
  /// The route of the next message of class `c` (counted as one of its trials while unsettled).
  Route next(int c) noexcept;
  /// Whether the sender should time its copy of the spread messages of class `c`.
  bool wants_send_timing(int c) const noexcept;
  /// The copy of one spread message of class `c` into the ring took `ns` (all its parts).
  void sent_spread(int c, std::uint64_t ns) noexcept;
  /// The verdict's figures, for the log: the sender's median copy in (0 before a verdict).
  std::uint32_t median_copy_in(int c) const noexcept;

  // The receiver's half.

  /// Whether the receiver should time its part of the messages of class `c` taking `route`.
  bool wants_receive_timing(int c, Route route) const noexcept;
  /// The receiver's part of one message of class `c` took `ns`. Returns the class's medians
  /// the first time both ways hold kTrials timings: the caller publishes them.
  std::optional<ReceiverTimings> received(int c, Route route, std::uint64_t ns) noexcept;

 private:
  struct Timings {
    std::array<std::uint32_t, kTrials> ns{};
    int count = 0;
    bool full() const noexcept { return count == kTrials; }
    void add(std::uint64_t t) noexcept;
    std::uint32_t median() const noexcept;
  };
  struct Sending {
    Timings copy_in;
    int sent = 0;
    std::optional<Route> verdict;
  };
  struct Receiving {
    Timings spread_copy_out;
    Timings rendezvous_copy;
    bool published = false;
  };
  std::array<Sending, kClasses> sending_{};
  std::array<Receiving, kClasses> receiving_{};
};

}  // namespace cohort::transport
