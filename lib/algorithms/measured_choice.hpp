#pragma once

// Choosing between two algorithms by timing them, where the table cannot know which is faster.
//
// On one host a large allreduce, reduce or reduce_scatter can run through the shared arena (its
// data passes from one core's cache to another's, which some hosts make slow) or by single copy
// (each rank reads its peers' buffers from memory, in place where they are mappable). Which is
// faster depends on the host, and on some hosts it changes within the hour
// (bench/PERFORMANCE-LOG.md, "A slow phase"). Both fold every element in rank order, so they give
// the same bits and a communicator may switch between them at will: it times each a few times, the
// ranks agree on the slowest rank's times, and the faster one runs until the next measurement.
// A large broadcast, scatter or gather, and a uniform alltoall on three ranks or more, is
// measured the same way: single copy reads a peer's pages, which is faster where they are huge
// pages and often slower on 4 KiB pages (the kernel pins each one), and no rank can see which kind
// another rank's buffer has; the arena hands every piece from one core's cache to another's,
// which some hosts make slow. A broadcast's, scatter's or gather's in-place and out-of-place calls
// keep classes of their own (CallForm).
//
// The schedule is the same on every rank, since every rank runs the same sequence of ops: a
// size class's first trial_calls() calls alternate the two algorithms (the table's choice
// first); the last of them ends with a vote (every rank contributes its best time per byte of
// each and whether its buffers were all mappable, MAX across ranks, through the arena under an
// announcement of its own); then the winner runs for calls_between_trials() calls, and the
// trials start again. Classes from kLargeClassBytes take kTrialCalls and kCallsBetweenTrials;
// smaller ones more trials, spaced by bytes, and (for the reductions below
// kAnyMemoryClassBytes) single copy only over mappable buffers.

#include <array>
#include <cstddef>
#include <cstdint>

namespace cohort::algorithms {

/// Which form a rooted data mover's call has at its root: its own block (a broadcast's vector,
/// a scatter's or gather's block) already where it belongs, or not. The two forms keep size
/// classes of their own: the arena overlaps an out-of-place root's own copy with the others'
/// copies, so on 2 ranks single copy won out of place what it lost in place, and a class that
/// mixed the forms kept whichever its last trials happened to see (bench/PERFORMANCE-LOG.md,
/// "The root's form"). Only the root can tell; the others learn it from the root's first
/// announcement (dispatch.cpp).
enum class CallForm : bool { OutOfPlace, InPlace };

class MeasuredChoice {
 public:
  /// Calls per measurement of a large size class, alternating: the table's choice, the
  /// alternative, and so on. Each algorithm's first call may fault pages in, map a peer's
  /// buffers or set scratch up, so each runs twice.
  static constexpr int kTrialCalls = 4;
  /// Calls that run the winner before a large class's next measurement: often enough to follow
  /// a host that changes over minutes, rarely enough that running the slower one twice costs
  /// under 1%.
  static constexpr std::uint32_t kCallsBetweenTrials = 256;
  /// Classes below this many bytes per call are "small": calls of microseconds, whose times a
  /// preempted rank (more ranks than cores) can multiply, and of which a program makes many.
  static constexpr std::size_t kLargeClassBytes = std::size_t{16} << 20;
  /// A small class's trials: each algorithm runs 8 times, so that one lucky or preempted call
  /// on some rank does not decide alone.
  static constexpr int kSmallTrialCalls = 16;
  /// A small class measures again after about this many bytes of the winner's calls (at least
  /// kCallsBetweenTrials, at most kMaxCallsBetweenTrials calls): its trials cost microseconds,
  /// but the slower algorithm there can be several times slower.
  static constexpr std::size_t kSmallBytesBetweenTrials = std::size_t{4} << 30;
  static constexpr std::uint32_t kMaxCallsBetweenTrials = 65536;
  /// The alternative wins only below this fraction of the table's choice's time, so noise
  /// between two near-equal algorithms keeps the table's.
  static constexpr double kMargin = 0.9;

  enum Which : int { kTable = 0, kAlternative = 1 };

  /// Whether a small class may choose single copy over ordinary memory. The reductions'
  /// (MappableOnly) may not below kAnyMemoryClassBytes (decide() says why); the data movers'
  /// (broadcast, scatter, alltoall; AnyMemory) may at every size, since their single copy walks
  /// a peer's pages whichever memory they are, and on huge pages it won on fresh input as in
  /// the loop.
  enum class SmallClass : bool { MappableOnly, AnyMemory };
  /// From this class up, a reduction's single copy may win over ordinary memory too. On
  /// 2026-11-30's host (forced allreduces, one launch each, loop and fresh input, in and out of
  /// place) single copy took 0.63-0.93 of the arena's time at 2-8 MiB on 3 and 4 ranks in 23
  /// cells of 24 (1.005 in one) and 0.82-0.91 at 2 MiB on 2 ranks, where at 1 MiB it lost in 11
  /// of 12 (2, 3 and 4 ranks). Forced the same way in the loop, a reduce_scatter's single copy
  /// took 0.6-0.67 of the arena's time at 2-8 MiB on 2 ranks and 0.72-1.01 on 3, and a reduce's
  /// 1.08-1.40 of it in 11 cells of 12, which its trials see. The mis-pick decide() tells of was at
  /// 64 KiB, where calls are microseconds; here they last hundreds, and where the trials misjudge
  /// (at 8 MiB on 3 ranks single copy's best trial took 0.42 s/GB against 0.26 in a loop of it)
  /// they keep the arena.
  static constexpr std::size_t kAnyMemoryClassBytes = std::size_t{2} << 20;

  MeasuredChoice() noexcept = default;
  /// The measurement of calls of `class_bytes` (its size class's smallest size) and up: trials
  /// and their spacing as above.
  explicit MeasuredChoice(std::size_t class_bytes,
                          SmallClass small = SmallClass::MappableOnly) noexcept;

  /// Calls per measurement and calls of the winner between measurements.
  int trial_calls() const noexcept { return trial_calls_; }
  std::uint32_t calls_between_trials() const noexcept { return calls_between_trials_; }

  /// Whether this call is one of the trials (its record counts).
  bool in_trials() const noexcept { return trial_ < trial_calls_; }

  /// Whether a vote must run now, after the call just recorded: the trials have ended and were
  /// not voted on.
  bool vote_due() const noexcept { return trial_ == trial_calls_; }

  /// This rank's vote: its best time for the table's choice and for the alternative, and 1 if
  /// any of its trial calls had buffers that were not mappable (core/mappable_memory.hpp), else
  /// 0.
  std::array<double, 3> vote() const noexcept {
    return {best_[0], best_[1], ordinary_ ? 1.0 : 0.0};
  }

  /// Decides from the votes combined across ranks (each the maximum over ranks: the slowest
  /// rank's best, and whether any rank had ordinary buffers), so every rank decides alike. A
  /// reduction's class below kAnyMemoryClassBytes takes the alternative only where no rank had
  /// ordinary buffers: there single copy works in place, while over ordinary memory the arena
  /// led at those sizes and single copy's trials flattered it (bench/PERFORMANCE-LOG.md,
  /// "Mappable buffers").
  void decide(const std::array<double, 3>& slowest) noexcept;

  /// Which algorithm this call runs (after any vote due).
  Which next() const noexcept;

  /// This rank's seconds (per byte, so sizes of one class compare) for the call next() chose,
  /// and whether all of this rank's buffers of that call were mappable.
  void record(double seconds, bool mappable = false) noexcept;

  /// The choice in force: the table's until a vote chose otherwise.
  Which chosen() const noexcept { return chosen_; }

 private:
  int trial_calls_ = kTrialCalls;
  /// Whether the vote decides by time alone, whatever memory the ranks' buffers were.
  bool by_time_alone_ = true;
  std::uint32_t calls_between_trials_ = kCallsBetweenTrials;
  int trial_ = 0;                 ///< calls measured in this round of trials (trial_calls_: done)
  std::uint32_t since_vote_ = 0;  ///< calls of the winner since the last vote
  Which chosen_ = kTable;
  std::array<double, 2> best_{};
  bool ordinary_ = false;  ///< some trial call of this round had buffers that were not mappable
};

}  // namespace cohort::algorithms
