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
// verdict, the sender alternates the two ways in blocks of kTrials messages, spread first (a
// block is timed as the way runs once chosen), and stamps each message with the
// time it posted it (both processes read one CLOCK_MONOTONIC). The receiver times each message
// whose receive was waiting for it: from the later of the send's and the receive's posting to
// the last byte in the receive's buffer. That is the whole transfer as the receive sees it: for
// a spread, the sender's copy in, the pieces' handover and the copy out, and in an exchange
// (sendrecv, halo) the receiver's own copy into its peer's ring, which holds up its receive;
// for a rendezvous, the announcement's handover and the receiver's process_vm_readv. (Timing
// the copies alone missed most of a spread's cost: on the 2026-12-02 host a 64 KiB exchange's
// copies took 8 us in and 1-2 out, the exchange 14-16, against 11 by rendezvous.) Once the
// receiver holds kTrials timings of each way it publishes their medians on its ring's line for
// that sender (Fastbox::Receiver::publish_timings), and the sender takes the faster (the spread
// only by a clear margin, kSpreadShare), counting its own medians for the other direction too
// where it receives that class, so the two ranks of an exchanging pair agree. Spread messages
// through slots of a ring's first lap are not timed (the process's first touch of each page
// faults it in).
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
  /// Sends of a class after which, without a verdict, it stays spread (eight blocks).
  static constexpr int kMaxTrials = 8 * kTrials;
  /// The spread wins a class only where its receives took at most this share of the
  /// rendezvous's time (decide()).
  static constexpr struct { std::uint64_t num, den; } kSpreadShare{9, 10};

  /// The class of a message of `bytes`; -1 when outside (kSmallest, kLargest].
  static int class_of(std::size_t bytes) noexcept;

  /// The receiver's medians for one class, as it publishes them, in nanoseconds.
  struct ReceiverTimings {
    std::uint32_t spread = 0;
    std::uint32_t rendezvous = 0;
  };

  // The sender's half.

  /// Whether class `c` has a verdict, or has run out of trials.
  bool settled(int c) const noexcept;
  /// Gives class `c` its verdict from the receiver's medians (`theirs`), plus this rank's own
  /// for the messages of class `c` the other way (own_timings): the spread where its receives
  /// took at most kSpreadShare of the rendezvous's time, else the rendezvous. True if it did
  /// now. While this rank has begun timing class `c` the other way but not finished, it waits
  /// for its own medians (up to kMaxTrials / 2 sends, then it decides on theirs alone), so that
  /// the two ranks of a pair that exchange messages count the same four medians and reach the
  /// same verdict: one direction spread and the other by rendezvous made 64 KiB exchanges slower
  /// than either way (15.8 us against 7.7-10).
  bool decide(int c, const ReceiverTimings& theirs) noexcept;
  /// The route of the next message of class `c` (counted as one of its trials while unsettled):
  /// blocks of kTrials of each way in turn, spread first, until the verdict.
  Route next(int c) noexcept;

  // The receiver's half.

  /// Whether the receiver should time the messages of class `c` taking `route`.
  bool wants_receive_timing(int c, Route route) const noexcept;
  /// Whether it should time those of class `c` at all (either route).
  bool wants_receive_timing(int c) const noexcept;
  /// One message of class `c` that took `route` took `ns`, as its receive saw it. Returns the
  /// class's medians the first time both ways hold kTrials timings: the caller publishes them.
  std::optional<ReceiverTimings> received(int c, Route route, std::uint64_t ns) noexcept;
  /// The medians received() returned for class `c`, once it has.
  std::optional<ReceiverTimings> own_timings(int c) const noexcept;
  /// Whether this rank has timed some messages of class `c` and not yet published.
  bool timing_under_way(int c) const noexcept;

 private:
  struct Timings {
    std::array<std::uint32_t, kTrials> ns{};
    int count = 0;
    bool full() const noexcept { return count == kTrials; }
    void add(std::uint64_t t) noexcept;
    std::uint32_t median() const noexcept;
  };
  struct Sending {
    int sent = 0;
    std::optional<Route> verdict;
  };
  struct Receiving {
    Timings spread;
    Timings rendezvous;
    std::optional<ReceiverTimings> published;
  };
  std::array<Sending, kClasses> sending_{};
  std::array<Receiving, kClasses> receiving_{};
};

}  // namespace cohort::transport
