#pragma once

// Algorithm selection as data. A table of rules (collective, byte range, world-size condition)
// -> ordered candidates; the first candidate that accepts the arguments runs (an algorithm may
// decline, e.g. recursive-doubling allgather on a non-power-of-two world). Before the table come
// the op's forced algorithm, then the job-wide COHORT_ALGO override for that collective.
//
// Bytes per collective (computed by the dispatcher, identical on every rank):
//   allreduce, broadcast, reduce: count * dtype size
//   allgather, gather, scatter:   total bytes of all blocks
//   reduce_scatter:               bytes of one rank's input (size * count * dtype size)
//   alltoall:                     size * block bytes when uniform; kUnknownBytes for alltoallv
//                                 (counts differ per rank, so it must not steer the choice)
//   barrier:                      0

#include <cohort/algorithm.hpp>

#include "algorithms/measured_choice.hpp"

#include <array>
#include <cstddef>
#include <limits>
#include <span>
#include <string_view>
#include <vector>

namespace cohort::algorithms {

inline constexpr std::size_t kKiB = 1024;
inline constexpr std::size_t kMiB = 1024 * kKiB;
inline constexpr std::size_t kUnknownBytes = std::numeric_limits<std::size_t>::max();

// Thresholds (bytes). First guesses, to be tuned with cohort-bench: below the latency limit the
// log-round algorithms win; above the bandwidth limit the ring's n-step latency is amortised.
/// allreduce: recursive doubling below this.
inline constexpr std::size_t kAllreduceLatencyMaxBytes = 64 * kKiB;
/// allreduce: Rabenseifner from kAllreduceLatencyMaxBytes up to this, ring above.
inline constexpr std::size_t kAllreduceHalvingMaxBytes = 4 * kMiB;
/// broadcast: binomial tree below this, scatter + allgather above.
inline constexpr std::size_t kBroadcastTreeMaxBytes = 256 * kKiB;
/// broadcast: from this size, and below kBroadcastTreeTwoRanksMaxBytes, on 2 ranks the tree (one
/// message the receiver reads from the root's pages) comes before shared memory. Out of place it
/// was 1.3-1.8x faster from 256 KiB (the root no longer copies into the arena and into its own
/// output one after the other); in place it tied or won up to 512 KiB and lost from 1 MiB (about
/// 1.3x), on pages of either size.
inline constexpr std::size_t kBroadcastTreeTwoRanksMinBytes = 256 * kKiB;
inline constexpr std::size_t kBroadcastTreeTwoRanksMaxBytes = 1 * kMiB;
/// reduce: binomial tree below this, reduce-scatter + gather above.
inline constexpr std::size_t kReduceTreeMaxBytes = 256 * kKiB;
/// allgather: recursive doubling / Bruck below this (total bytes), ring above.
inline constexpr std::size_t kAllgatherLatencyMaxBytes = 64 * kKiB;
/// reduce_scatter: recursive halving below this (input bytes), ring above.
inline constexpr std::size_t kReduceScatterHalvingMaxBytes = 1 * kMiB;
/// alltoall: Bruck below this (uniform, total bytes), pairwise above.
inline constexpr std::size_t kAlltoallBruckMaxBytes = 16 * kKiB;
/// scatter: from this total size on 3 ranks the binomial tree comes before shared memory. There
/// the tree is flat (the root sends both blocks itself) and the two receivers copy in parallel,
/// in one copy each, where the root writes both into the arena first. It won at 8 and 16 MiB on
/// buffers of 4 KiB and of 2 MiB pages, and at 1-4 MiB only on 2 MiB pages. (On 2 ranks the
/// arena overlaps the root's and the receiver's copies, and the tree's single copy, which walks
/// the root's pages, lost from 2 MiB on 4 KiB pages; from 4 ranks the tree forwards.)
inline constexpr std::size_t kScatterTreeMinBytes = 8 * kMiB;
/// scatter: from this total size, and below kScatterTreeTwoRanksMaxBytes, on 2 ranks the tree
/// (one message, read from the root's pages) comes before shared memory. At 1 MiB it was
/// 1.1-1.4x faster on pages of either size; at 256 KiB it lost a tenth on 4 KiB pages, and from
/// 2 MiB in place on 4 KiB pages (walking the root's small pages costs more than the arena's
/// second copy).
inline constexpr std::size_t kScatterTreeTwoRanksMinBytes = 512 * kKiB;
inline constexpr std::size_t kScatterTreeTwoRanksMaxBytes = 2 * kMiB;
/// alltoall: from this uniform total size on 2 ranks, single copy where the kernel allows it,
/// else pairwise exchange over UCX (both one copy each way) instead of shared memory (two), on
/// buffers of 4 KiB and of 2 MiB pages alike. In alternating launches single copy won or tied
/// against pairwise at 1-32 MiB on pages of either size, but for 1 MiB in place on 2 MiB pages
/// (53 against 60 us); on fresh input it led out of place at 2-4 MiB and was even elsewhere
/// (bench/PERFORMANCE-LOG.md).
inline constexpr std::size_t kAlltoallOneCopyTwoRanksMinBytes = 1 * kMiB;
/// allgather: from this total size on 2 ranks, the ring over UCX (one copy of the peer's block,
/// read from its pages) comes before shared memory (a copy into the arena and one out). In place
/// it was twice as fast from 128 KiB; out of place the arena held on to 1 MiB on 4 KiB pages
/// (about 1.1x), and from 2 MiB the ring won or tied on pages of either size.
inline constexpr std::size_t kAllgatherRingTwoRanksMinBytes = 2 * kMiB;
// Single copy (process_vm_readv straight out of the peer's buffer, <family>/single_copy.cpp) on
// one host, where the kernel allows it: chosen where it won or tied against the previous choice
// in place and out of place, on buffers of 4 KiB pages and of 2 MiB pages
// (bench/PERFORMANCE-LOG.md, "Single copy").
/// allreduce, 2 ranks: single copy from this size up to the next. There it was 1.5-1.8x faster
/// than the arena's share scheme on buffers of 2 MiB pages and tied on 4 KiB pages (up to 1.2x
/// either way); below 4 MiB in place, from 16 MiB on 4 KiB pages and at 64 MiB on either it
/// was slower (bench/PERFORMANCE-LOG.md, single-copy allreduce).
inline constexpr std::size_t kAllreduceSingleCopyTwoRanksMinBytes = 4 * kMiB;
inline constexpr std::size_t kAllreduceSingleCopyTwoRanksMaxBytes = 16 * kMiB;
/// allgather, 2 ranks: single copy from this total size (1.2-2.5x faster to 2 MiB).
inline constexpr std::size_t kAllgatherSingleCopyTwoRanksMinBytes = 32 * kKiB;
/// allreduce, reduce and reduce_scatter (its whole input) on one host from this size on: the
/// arena and single copy are timed and the faster runs (measured_choice.hpp), where the table
/// would run the arena; the figures below are the allreduce's. On 2026-11-27's host single
/// copy was 1.2-1.9x faster at 64 MiB, and an hour later the arena was (bench/PERFORMANCE-LOG.md,
/// "A slow phase"). Below 2 MiB the arena wins on ordinary memory, but over mappable buffers
/// (Buffer::allocate_mappable) single copy works in place and was 1.2-3x faster from 4 KiB on 2
/// ranks and from 16 KiB on 4 ("Mappable buffers"); which kind of memory every rank passes only
/// the timing can tell without a word between the ranks.
inline constexpr std::size_t kMeasuredChoiceMinBytes = 16 * kKiB;
/// Size classes with a measurement of their own: powers of two from kMeasuredChoiceMinBytes,
/// the last taking everything larger.
inline constexpr std::size_t kMeasuredChoiceBuckets = 26;
/// broadcast, scatter, gather and uniform alltoall on one host, from the sizes below on: the
/// arena and single copy are timed as above, over any memory, the table's first of the two being
/// the measurement's "table" side. Single copy reads a peer's pages, which is faster on huge
/// pages and can be slower on 4 KiB ones (the kernel pins every page it reads), and no rank can
/// see which kind another rank's buffer has. A broadcast's, scatter's and gather's in-place and
/// out-of-place calls are measured apart (CallForm), so broadcasts and gathers are measured on 2
/// ranks too, where the arena's two copies overlap and a measurement that mixed the forms (tried
/// 2026-11-28) lost in place what it won out of place. An alltoall, whose every rank knows its
/// form, from this many ranks: on 2 the table runs single copy or pairwise exchange from 1 MiB,
/// without the arena.
inline constexpr int kAlltoallMeasuredMinWorldSize = 3;
/// scatter, from this many ranks: on 2 the table's single copy (from 2 MiB) matched Open MPI in
/// place and led it out of place in three launches of 2026-12-02, and measured (16 trials a
/// class below 16 MiB) the 2 MiB class ran at twice that time in all three, in either form.
inline constexpr int kScatterMeasuredMinWorldSize = 3;
/// broadcast: on 2026-11-30's host (3 and 4 ranks on 2 vCPUs, forced, one launch each, both
/// forms, in the loop and on fresh input) single copy took 0.29-0.85 of the arena's time at 2-8
/// MiB on huge pages in 11 cells of 12 (1.08 in one), and 0.90-1.45 of it on 4 KiB pages (3
/// ranks), slower in 7 cells of 8; at 512 KiB anywhere from 0.71 to 1.35, with no steady winner.
inline constexpr std::size_t kBroadcastMeasuredMinBytes = 1 * kMiB;
/// scatter (its whole vector; scatterv too, whose counts every rank passes alike) and uniform
/// alltoall (one rank's input): the same launches put single copy at 0.3-1.0 of the arena's time
/// from 256 KiB in most cells on pages of either size, and 1.06-1.44 in a few (scatter of 512
/// KiB fresh on 3 ranks and of 256 KiB in the loop on 4; alltoall of 256 KiB on 4 KiB pages);
/// the table ran the arena there.
inline constexpr std::size_t kScatterMeasuredMinBytes = 256 * kKiB;
inline constexpr std::size_t kAlltoallMeasuredMinBytes = 256 * kKiB;
/// gather (its whole output; gatherv too): the table runs the arena, whose root copies every
/// piece out of a slot a peer's core just wrote. On 2026-12-02's host, where that handoff ran at
/// a quarter of a core's own speed (cohort-handoff-bench: shared / private 4.4), in-place
/// gathers of 2-8 MiB on 2 ranks took 2.4-3.4x Open MPI's time (whose root reads the peers'
/// buffers itself, as single copy does), and 0.88-1.04x measured. Not below 2 MiB: a measured
/// gather's others wait for the root's first flag, so they no longer write their first piece
/// while the root still copies out the previous gather's last one, and in a loop of 256 KiB
/// gathers the arena went from 16 to 38 us (bench/PERFORMANCE-LOG.md, "The root's form").
inline constexpr std::size_t kGatherMeasuredMinBytes = 2 * kMiB;
/// allgather, 3 ranks and more: single copy from this total size (below it the arena's one
/// handoff per piece beats n - 1 reads of small blocks).
inline constexpr std::size_t kAllgatherSingleCopyMinBytes = 4 * kMiB;
/// broadcast, 2 ranks: single copy from this size up to the next, where the tree takes over. Up
/// to one arena slot the arena cannot overlap anything: its root copies the vector in, then the
/// receiver copies it out. At 128 KiB (2026-12-02, `--algos all`, two launches) single copy took
/// 11.7-13.0 us out of place and 11.8-12.0 in place, the arena 20.7-23.6 and the tree 13.2-13.7;
/// when lines moved slowly, 13.8-14.1 against the arena's 71-73. Beyond a slot the arena (or the
/// tree) is as fast out of place and faster in place: its root copies a piece in while the
/// receiver copies the last one out, and walking the root's pages costs more than that second copy
/// (in place at 1 MiB, single copy took 1.5x as long on 2 MiB pages).
inline constexpr std::size_t kBroadcastSingleCopyTwoRanksMinBytes = 32 * kKiB;
inline constexpr std::size_t kBroadcastSingleCopyTwoRanksMaxBytes = 256 * kKiB;
/// scatter, 2 ranks: single copy from this total size. The one exception to the rule above:
/// from 2 MiB in place on 4 KiB pages it is slower than the arena (walking the root's small
/// pages costs more than the arena's second copy), but out of place it is about twice as fast
/// on pages of either size (bench/PERFORMANCE-LOG.md, "Single copy").
inline constexpr std::size_t kScatterSingleCopyTwoRanksMinBytes = 64 * kKiB;
/// scatter, 3 ranks and more: single copy from this total size; every receiver copies its own
/// block at once instead of the root writing all of them into the arena.
inline constexpr std::size_t kScatterSingleCopyMinBytes = 1 * kMiB;
/// alltoall, 3 ranks and more: single copy from this uniform total size (alltoallv, whose sizes
/// steer nothing, keeps the arena).
inline constexpr std::size_t kAlltoallSingleCopyMinBytes = 4 * kMiB;
/// Ring-style alternatives only pay off from this many ranks (with 2 they move the same bytes
/// as the simple algorithm, with more steps).
inline constexpr int kRingMinWorldSize = 3;

enum class WorldSizeCondition : std::uint8_t { Any, PowerOfTwo, NotPowerOfTwo };

struct SelectionRule {
  Collective collective;
  std::size_t min_bytes;  ///< inclusive
  std::size_t max_bytes;  ///< exclusive (kUnknownBytes: no upper limit, includes kUnknownBytes)
  int min_world_size;
  WorldSizeCondition world;
  std::array<Algorithm, 4> candidates;  ///< in order of preference; Auto ends the list
  int max_world_size = std::numeric_limits<int>::max();
};

/// The built-in table. For every collective, bytes and world size some rule matches, and every
/// rule's last candidate accepts all arguments.
std::span<const SelectionRule> selection_table() noexcept;

/// Whether `algorithm` is implemented for `collective`'s family (Auto is not an implementation;
/// the answer comes from the descriptor list, registry.cpp).
bool algorithm_implements(Collective collective, Algorithm algorithm) noexcept;
/// The algorithms implemented for `collective`, for error messages and sweeps.
std::vector<Algorithm> algorithms_for(Collective collective);

/// Per-family job-wide overrides (Auto: none), indexed by Collective (v-forms, send and recv
/// never have one).
using AlgorithmOverrides = std::array<Algorithm, kCollectiveCount>;

/// Parses "allreduce:ring,broadcast:tree" (whitespace around tokens allowed, "auto" clears).
/// Throws Error(InvalidArgument) naming the bad token: unknown collective or algorithm, an
/// algorithm the collective does not implement, a missing ':', or a collective given twice.
AlgorithmOverrides parse_algorithm_overrides(std::string_view spec);

/// COHORT_ALGO (core/tunables.hpp) parsed, cached per thread until the tunables are reloaded (no
/// overrides when unset). Throws like parse_algorithm_overrides while the value is malformed.
const AlgorithmOverrides& environment_algorithm_overrides();

/// The algorithms to try, in order: a fixed-capacity list (a forced one, an override and a rule's
/// candidates), so choosing costs no allocation on the path of every small collective.
class Candidates {
 public:
  static constexpr std::size_t kCapacity =
      2 + std::tuple_size_v<decltype(SelectionRule::candidates)>;
  void push_back(Algorithm a) noexcept {
    if (size_ < kCapacity) items_[size_++] = a;
  }
  const Algorithm* begin() const noexcept { return items_.data(); }
  const Algorithm* end() const noexcept { return items_.data() + size_; }
  std::size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }

 private:
  std::array<Algorithm, kCapacity> items_{};
  std::size_t size_ = 0;
};

/// Throws Error(InvalidArgument) naming the algorithms `collective` has when `forced` (unless
/// Auto) is not one of them. Communicators call it on the caller's thread, before queueing.
void check_forced_algorithm(Collective collective, Algorithm forced);

/// Candidates in the order they are tried: `forced` (unless Auto), then the override for this
/// collective's family (unless Auto), then the table's rule for (bytes, world size); duplicates
/// removed. Throws Error(InvalidArgument) when `forced` is not implemented for `collective`.
Candidates select_candidates(Collective collective, std::size_t bytes, int world_size,
                             Algorithm forced, const AlgorithmOverrides& overrides);

/// select_candidates with a memory of the last choice per family: an op with the shape its
/// family's previous op had (the steady state of a training loop or a benchmark) gets the same
/// list back after four comparisons instead of a walk through the table. It also keeps
/// COHORT_ALGO parsed, as environment_algorithm_overrides() does per thread, so the op path
/// reads no thread-local storage. Owned by one communicator; used only by the thread driving
/// it (not thread-safe).
class SelectionMemo {
 public:
  /// What select_candidates(collective, ..., environment_algorithm_overrides()) returns, with the
  /// same errors.
  const Candidates& candidates(Collective collective, std::size_t bytes, int world_size,
                               Algorithm forced);

  /// The measurement for an allreduce, a reduce or a reduce_scatter of `bytes` (selection_bytes:
  /// a reduce_scatter's whole input), a broadcast, gather(v) or (on kScatterMeasuredMinWorldSize
  /// ranks or more) scatter(v) whose root's call has `form` (ignored for the others), or a
  /// uniform alltoall on kAlltoallMeasuredMinWorldSize ranks or more, one per collective (and
  /// form) and power-of-two size class, or null where none
  /// applies: another collective, below kMeasuredChoiceMinBytes (or the family's own minimum
  /// above), an alltoallv (kUnknownBytes), or with a forced algorithm or a COHORT_ALGO override
  /// for the collective (both must be the same on every rank, as for any op). Whether every rank
  /// allows it (COHORT_MEASURED_CHOICE) is the arena's to say. Whether it is null never depends
  /// on `form`.
  MeasuredChoice* measured(Collective collective, std::size_t bytes, int world_size,
                           Algorithm forced, CallForm form = CallForm::OutOfPlace);

 private:
  struct Entry {
    bool valid = false;
    std::size_t bytes = 0;
    int world_size = 0;
    Algorithm forced = Algorithm::Auto;
    Candidates candidates;
  };
  std::array<Entry, kCollectiveCount> entries_{};
  using Classes = std::array<MeasuredChoice, kMeasuredChoiceBuckets>;
  /// One per size class, each with its class's trials (MeasuredChoice(class_bytes)): the
  /// reductions' (single copy over mappable memory only, in classes below
  /// MeasuredChoice::kAnyMemoryClassBytes), then the data movers' (whose classes below their
  /// minimum are never used).
  Classes measured_allreduce_ = measured_classes(MeasuredChoice::SmallClass::MappableOnly);
  Classes measured_reduce_ = measured_classes(MeasuredChoice::SmallClass::MappableOnly);
  Classes measured_reduce_scatter_ = measured_classes(MeasuredChoice::SmallClass::MappableOnly);
  /// Rooted movers: indexed by CallForm.
  std::array<Classes, 2> measured_broadcast_{
      measured_classes(MeasuredChoice::SmallClass::AnyMemory),
      measured_classes(MeasuredChoice::SmallClass::AnyMemory)};
  std::array<Classes, 2> measured_scatter_{measured_classes(MeasuredChoice::SmallClass::AnyMemory),
                                           measured_classes(MeasuredChoice::SmallClass::AnyMemory)};
  std::array<Classes, 2> measured_gather_{measured_classes(MeasuredChoice::SmallClass::AnyMemory),
                                          measured_classes(MeasuredChoice::SmallClass::AnyMemory)};
  Classes measured_alltoall_ = measured_classes(MeasuredChoice::SmallClass::AnyMemory);
  static Classes measured_classes(MeasuredChoice::SmallClass small) noexcept;
  /// Parses COHORT_ALGO again when the tunables were reloaded, and then forgets every entry.
  void refresh();
  /// The tunables snapshot overrides_ was parsed from; a new one (reload) clears every entry.
  const void* parsed_from_ = nullptr;
  AlgorithmOverrides overrides_{};
};

}  // namespace cohort::algorithms
