#pragma once

// Host-local shared memory for collectives among ranks of one host, moved by loads and stores
// instead of messages.
//
// Why: over a message transport every byte of a collective is copied into a FIFO by the sender,
// out of it by the receiver, and then reduced: three passes over memory, plus a software
// handoff per message. When every rank of a communicator maps one segment, a rank copies its
// piece in once, each rank reduces its share of the piece straight from everyone's copy, and
// everyone copies the finished piece out: the user's buffers are read and written once, the
// segment stays cache-resident because pieces are small, and a small collective costs one
// cache-line handoff per rank instead of a matched send and receive.
//
// Layout: one memfd segment created by the communicator's rank 0 and mapped by the others
// through /proc/<pid>/fd (so nothing is left behind in /dev/shm when a job dies). Per rank: a
// control block (one flag per phase and slot parity, each on its own cache lines so a rank's
// stores never invalidate a line another rank is polling for a different reason; the Arrived
// lines also carry kInlineBytes of data; then the eager lines and the Consumed flag, below) and
// two data and two result slots of kSlotBytes (pieces alternate between them).
//
// Synchronisation is by generation numbers. Ops of a communicator run in the same order on every
// rank, so each rank counts pieces identically; piece g uses slot parity g % 2 and is announced
// by storing g into a flag (release) that peers poll (acquire). Any error poisons the
// communicator, so the counters never need to resynchronise.
//
// Reusing a parity needs no acknowledgement of its own, because every algorithm keeps one rule:
//   a rank announces Arrived(g) only once it no longer reads any rank's data slot (or inline
//   bytes) of a generation below g, nor any result slot of a generation below g - 1.
// So a rank may overwrite its data slot for g once every peer announced Arrived(g - 1)
// (wait_until_data_free), and its result slot for g once every peer announced Arrived(g).
//
// Eager lines, for small rooted ops (a broadcast's or a reduce's vector of at most kEagerBytes):
// each rank also has kEagerDepth lines of their own numbering (eager generations e = 1, 2, ...,
// e using line e % kEagerDepth) and one Consumed flag. A line's payload sits next to its flag
// when it is at most kInlineBytes (one cache line carries both), otherwise in one of
// kEagerAreaDepth areas of kEagerBytes (by e % kEagerAreaDepth). A writer (broadcast's and
// scatter's root, reduce's and gather's non-roots) fills its line for e, announces Eager(e) and
// returns without waiting for anyone; readers take it and announce Consumed(e), as every rank does
// at the end of every eager op. A line is rewritten for e once every peer announced Consumed(e -
// kEagerDepth), and an area once every peer announced Consumed(e - kEagerAreaDepth)
// (wait_until_eager_free), so a writer may run up to kEagerDepth tiny ops (kEagerAreaDepth with
// larger payloads) ahead of the slowest reader, as MPI's eager sends let a root run ahead. An eager
// op also takes a generation g and announces Arrived(g) on entry (it reads and writes no slot of
// that numbering, so the rule above still holds): a peer that runs another op at g then finds the
// disagreement in that flag's announcement instead of waiting for the deadline. The eager line
// carries g and the op's announcement too, so a reader whose own match them reads nothing else (the
// writer's Arrived line changes at every op; reading it at every op would hand it between cores
// each time), and a reader that finds the same call stamped with another g knows an earlier op
// differed.

#include "transport/interruption.hpp"
#include "transport/peer_mappings.hpp"
#include "transport/process_watch.hpp"
#include "transport/transport.hpp"
#include "transport/wait_policy.hpp"

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace cohort::transport {

class SharedArena {
 public:
  /// Bytes of one data or result slot: the largest piece one pipeline step moves. Small enough
  /// that a piece from every rank stays in cache between being copied in and reduced.
  static constexpr std::size_t kSlotBytes = 256 * 1024;
  /// Bytes carried in the cache line of the Arrived flag itself: a piece this small reaches a
  /// peer in the same line transfer that tells it the piece is there.
  static constexpr std::size_t kInlineBytes = 56;
  /// Eager lines per rank: how many small rooted ops a writer may run ahead of its readers.
  /// Where ranks outnumber cores a writer that reaches the end of its lines yields its core, so
  /// the depth is how many ops each trip through the scheduler pays for: 3 and 4 ranks on 2
  /// cores ran 24-128 B broadcasts, reduces, gathers and scatters in 0.6-2.4 us at 16 lines,
  /// 0.3-0.9 at 64 and 0.3-1.0 (mostly under 0.5) at 256 (bench/PERFORMANCE-LOG.md, "Deeper
  /// eager lines"). It costs 256 flag line pairs (32 KiB) per rank.
  static constexpr std::uint64_t kEagerDepth = 256;
  /// Payload areas per rank, for eager payloads over kInlineBytes: how many such ops a writer
  /// may run ahead. Fewer than the lines: each area is a page, and a page's first access costs
  /// this project's CI machine (a paravirtualised guest) microseconds even when faulted in
  /// beforehand, so the first lap through 256 of them (a new page for the writer and for each
  /// reader at every op) made each of a program's first 256 such ops 14-22 us; faulting and
  /// touching them all when the arena is made took a mesh's first collectives from 4.5 to 47 ms
  /// ("Deeper eager lines"). 64 areas of 4 KiB: 256 KiB per rank, a first lap that a bench's
  /// warm-up covers.
  static constexpr std::uint64_t kEagerAreaDepth = 64;
  /// The largest payload of an eager line. Up to it a writer returns at once instead of waiting
  /// for its readers each op: on ranks that share cores that wait is a trip through the
  /// scheduler. Measured (bench/PERFORMANCE-LOG.md, eager lines): 3 ranks on 2 cores, 64 B-1 KiB
  /// broadcasts took 2-3 us on the slot path; with 256 lines, 2-4 KiB broadcasts, reduces,
  /// gathers and scatters on 3 and 4 ranks took 6-11 us on it and 0.4-1.0 through lines of 4 KiB
  /// ("Deeper eager lines"; measured with 256 areas). Areas of 8 KiB took 8 KiB ops to 0.8-2.2 us
  /// as well, for twice the memory; not kept.
  static constexpr std::size_t kEagerBytes = 4096;
  static_assert(kEagerAreaDepth <= kEagerDepth);

  enum class Flag : int {
    Arrived = 0,   ///< this rank's piece g is in its data slot
    Reduced = 1,   ///< this rank's share of piece g is in its result slot
    Eager = 2,     ///< this rank's tiny piece of eager generation e is in its eager line
    Consumed = 3,  ///< this rank is done with every eager generation up to e
  };

  /// Steps of the caller's op that create() uses for its messages: first_tag's step and the
  /// next kSetupSteps - 1.
  static constexpr int kSetupSteps = 6;

  /// Collective over the ranks of `transport` (a communicator's). Every rank returns an arena,
  /// or every rank returns null: when some rank is on another host, COHORT_SHARED_MEMORY=off on
  /// some rank, size is 1, or some rank could not map the segment. The ranks agree through
  /// six small messages gathered to and sent from rank 0 (not through the store: a store
  /// request blocks every other thread's store requests, and set-up runs inside ops that
  /// threads drive concurrently), tagged `first_tag` and the kSetupSteps - 1 following steps.
  /// `local_world_size` ranks share this host (it sizes busy-polling). Throws the transport's
  /// errors (a timeout at `deadline` names the missing ranks and `what`).
  static std::unique_ptr<SharedArena> create(Transport& transport, Tag first_tag,
                                             int local_world_size, Deadline deadline,
                                             const std::string& what);

  /// Waits in this arena check `interruption` (Communicator::abort()) every polling round and
  /// throw its error once it is raised. It must outlive the arena. Set once, right after create().
  void set_interruption(const Interruption* interruption) noexcept { interruption_ = interruption; }

  ~SharedArena();
  SharedArena(const SharedArena&) = delete;
  SharedArena& operator=(const SharedArena&) = delete;

  int rank() const noexcept { return rank_; }
  int size() const noexcept { return size_; }

  /// Whether every rank can copy straight out of every other rank's memory (read_from): the
  /// same on every rank. False when COHORT_SINGLE_COPY=off on some rank, or the kernel refuses
  /// process_vm_readv between them (Yama ptrace_scope, a seccomp profile, different users or
  /// pid namespaces); set-up reads a probe value from every peer to find out.
  bool single_copy() const noexcept { return single_copy_; }
  /// Whether allreduces, reduces and reduce_scatters may choose between the arena and single
  /// copy by timing them (algorithms/measured_choice.hpp): single_copy() and
  /// COHORT_MEASURED_CHOICE=auto on every rank. The same on every rank, so a rank set apart cannot
  /// make the ranks run different algorithms.
  bool measured_choice() const noexcept { return measured_choice_; }
  /// Copies `bytes` from address `source` in rank r's process into `into`, in one copy
  /// (process_vm_readv). Only when single_copy(); r must keep `source` valid and unchanged
  /// until this rank tells it it is done (the single-copy algorithms' second handoff). Throws
  /// Error(RemoteError) when r's process is gone, Error(SystemError) naming r and the range
  /// when the kernel refuses.
  void read_from(int r, void* into, const void* source, std::size_t bytes,
                 const std::string& what) const;
  /// This process's address of the `bytes` at `ref` in rank r's mappable memory
  /// (core/mappable_memory.hpp), mapped read-write on first use and kept
  /// (transport/peer_mappings.hpp); valid while calls name the same `op` (any number that
  /// identifies the op, such as one of its generations). Only when single_copy(): opening r's
  /// descriptor needs the same access to its process. r must keep the allocation alive until
  /// this rank tells it it is done, as for read_from. Throws as PeerMappings::map. One op at a
  /// time.
  std::byte* map_peer(int r, const MappableRef& ref, std::size_t bytes, std::uint64_t op,
                      const std::string& what);
  /// Peers' allocations mapped now (for tests).
  std::size_t peer_mappings() const noexcept { return mappings_.size(); }
  /// Marks every flag of this rank so that each peer waiting on it, in this op or a later one
  /// through the arena, fails at once instead of at its deadline: with Error(InvalidArgument)
  /// as for a disagreement found in a wait when `disagreement` (lengths that disagree), else
  /// with Error(RemoteError) saying this rank failed. For an op that fails outside a wait of its
  /// own (a peer's buffer it could not read, a timeout). Never throws.
  void mark_failed(bool disagreement) noexcept {
    mark_disagreed(disagreement ? announcement_ : kFailedOp);
  }

  /// Bytes of one of n equal, cache-line-aligned parts of a slot (alltoall's and scatter's
  /// per-destination sub-slots); 0 when a part would be under one cache line.
  static constexpr std::size_t sub_slot_bytes(std::size_t n) noexcept {
    constexpr std::size_t kLine = 64;
    return kSlotBytes / n / kLine * kLine;
  }

  /// What the op about to run announces with every flag it publishes (packed by the caller:
  /// collective, dtype, reduce op, root, bytes). A peer whose flag for a generation of this op
  /// carries another announcement disagrees with this rank about the op: the wait that sees it
  /// throws Error(InvalidArgument) naming both ranks and both announcements, and marks this rank's
  /// flags so every peer waiting on it fails the same way instead of waiting or reading garbage.
  /// `describe` turns an announcement into text for that message. Costs one store per publish
  /// and one load per completed wait, on the line next to the flag's.
  void begin_op(std::uint64_t announcement, std::string (*describe)(std::uint64_t)) noexcept {
    announcement_ = announcement;
    describe_ = describe;
    op_first_generation_ = generation_ + 1;
    op_first_eager_ = eager_generation_ + 1;
  }

  /// The next piece's generation (1, 2, ...): the same sequence on every rank.
  std::uint64_t next_generation() noexcept { return ++generation_; }
  /// The last generation taken (0 before the first): the op about to run starts at the next.
  std::uint64_t generation() const noexcept { return generation_; }
  /// The next eager op's eager generation (1, 2, ...): the same sequence on every rank.
  std::uint64_t next_eager_generation() noexcept { return ++eager_generation_; }

  /// An eager op's two numbers: its generation (announced on entry) and its eager generation.
  struct EagerStep {
    std::uint64_t generation;
    std::uint64_t eager;
  };
  /// Enters an eager op: takes the next generation and announces Arrived for it (the rank reads
  /// no earlier piece any more), then takes the next eager generation.
  EagerStep begin_eager() noexcept {
    const std::uint64_t g = next_generation();
    publish(Flag::Arrived, g);
    return EagerStep{g, next_eager_generation()};
  }

  /// Rank r's data / result slot for piece `generation` (kSlotBytes each, 64-byte aligned).
  std::byte* data(int r, std::uint64_t generation) const noexcept;
  std::byte* result(int r, std::uint64_t generation) const noexcept;
  /// Rank r's inline bytes for piece `generation` (kInlineBytes, next to its Arrived flag).
  std::byte* inline_data(int r, std::uint64_t generation) const noexcept;
  /// Where rank r's eager line for eager generation `eager` holds a payload of `bytes` (at most
  /// kEagerBytes): next to its flag up to kInlineBytes, else in the line's own area. Writer and
  /// readers pass the same size.
  std::byte* eager_data(int r, std::uint64_t eager, std::size_t bytes) const noexcept;

  /// Announces that this rank reached `generation` for `flag` (a release store: everything
  /// written to this rank's slots before it is visible to a peer that sees the flag).
  void publish(Flag flag, std::uint64_t generation) noexcept;
  /// Announces Eager(step.eager): this rank's piece of that eager op is in its line, stamped with
  /// the op's generation (step.generation), which readers compare with theirs (wait_for_eager).
  void publish_eager(const EagerStep& step) noexcept;

  /// Waits until rank `r` announced `generation` for `flag`.
  void wait_for(int r, Flag flag, std::uint64_t generation, Deadline deadline,
                const std::string& what);
  /// Waits until rank `r` announced Arrived(`generation`) and returns what it announced there,
  /// which must be one of `accepted` (not empty): for an op that only r knows in full (a rooted
  /// op whose root alone can tell its form), read before this rank commits to how it runs it;
  /// the caller then begin_op()s with the answer. Anything else is a disagreement, thrown and
  /// marked as wait_for does (judged against accepted.front(), which begin_op must have
  /// announced, so that `generation` belongs to the op). r must not rewrite that line
  /// (announce Arrived(generation + 2)) before this rank announced Arrived(generation + 1),
  /// which every algorithm that waits for its peers between its steps keeps.
  std::uint64_t wait_for_one_of(int r, std::uint64_t generation,
                                std::span<const std::uint64_t> accepted, Deadline deadline,
                                const std::string& what);
  /// Waits until every other rank announced `generation` for `flag`.
  void wait_for_all(Flag flag, std::uint64_t generation, Deadline deadline,
                    const std::string& what);
  /// Waits until this rank may write its data slot and inline bytes for `generation`: every
  /// peer announced Arrived(generation - 1). Usually already true (a flag check per peer).
  void wait_until_data_free(std::uint64_t generation, Deadline deadline, const std::string& what) {
    if (generation > 1) wait_for_all(Flag::Arrived, generation - 1, deadline, what);
  }

  /// Waits until rank `r` announced Eager(`eager`), for an eager op that took generation
  /// `generation`: while waiting it also looks at r's Arrived(generation), so a peer running
  /// another op there fails this wait at once (InvalidArgument) instead of at the deadline. The
  /// piece carries the generation and announcement of the op that wrote it: when both match, the
  /// wait reads r's Arrived line only while it has to wait for the piece; a piece of the same
  /// call written at another generation (r ran other ops before it) fails the wait too.
  void wait_for_eager(int r, std::uint64_t eager, std::uint64_t generation, Deadline deadline,
                      const std::string& what);
  /// Waits until this rank may rewrite its eager line for `eager` with a payload of `bytes`:
  /// every peer announced Consumed(eager - kEagerDepth), or Consumed(eager - kEagerAreaDepth)
  /// when the payload goes to an area. Usually already true, and known without reading the
  /// peers' Consumed lines: they are read only once the progress last seen there no longer
  /// covers `eager` (each read takes a cache line from the peer's core, a large part of a tiny
  /// op).
  void wait_until_eager_free(std::uint64_t eager, std::size_t bytes, Deadline deadline,
                             const std::string& what) {
    const std::uint64_t lag = bytes <= kInlineBytes ? kEagerDepth : kEagerAreaDepth;
    if (eager <= lag + consumed_by_all_) return;
    wait_for_all(Flag::Consumed, eager - lag, deadline, what);
    note_consumed_by_all(eager - lag);
  }

  std::string description() const;

 private:
  struct Control;
  SharedArena(int rank, int size, void* base, std::size_t bytes, std::size_t rank_stride,
              WaitPolicy policy, std::vector<ProcessWatch> watches, bool single_copy,
              bool measured_choice);

  std::atomic<std::uint64_t>& flag(int r, Flag flag, std::uint64_t generation) const noexcept;
  bool reached(int r, Flag flag, std::uint64_t generation) const noexcept;
  /// After rank r reached `generation` for `flag`: throws when it announced another op, or
  /// marked itself as having found a disagreement.
  void check_announcement(int r, Flag flag, std::uint64_t generation, const std::string& what);
  /// After every peer announced Consumed(`reached`): records the least eager generation the
  /// peers' Consumed lines show now (at least `reached`). A peer's disagreement mark counts as
  /// `reached`, not as the mark's value (above every generation), so the writer goes on
  /// reading that peer's line.
  void note_consumed_by_all(std::uint64_t reached) noexcept;
  /// What the op with `announcement` was ("broadcast of 16 bytes (float, root 0)"), for errors.
  std::string describe_call(std::uint64_t announcement) const;
  /// Sets every flag of this rank to kDisagreed so peers stop waiting on it.
  /// `why`: the announcement of the op the ranks disagree about, or kFailedOp.
  void mark_disagreed(std::uint64_t why) noexcept;
  /// In a mark, instead of an announcement: the rank failed (mark_failed), no disagreement. No
  /// op announces it (its collective field names none).
  static constexpr std::uint64_t kFailedOp = UINT64_MAX;
  /// The slow path of wait_for: spin, yield, then sleep with liveness checks until the deadline.
  /// `arrived` (not 0): every few polls, a disagreement in r's Arrived(arrived) throws.
  void block_until(int r, Flag flag, std::uint64_t generation, Deadline deadline,
                   const std::string& what, std::uint64_t arrived = 0);
  /// The first generation of the running op in `flag`'s numbering (main or eager).
  std::uint64_t op_first(Flag flag) const noexcept {
    return flag == Flag::Eager || flag == Flag::Consumed ? op_first_eager_ : op_first_generation_;
  }

  int rank_;
  int size_;
  void* base_;
  std::size_t bytes_;
  std::size_t rank_stride_;
  WaitPolicy policy_;
  const Interruption* interruption_ = nullptr;
  std::vector<ProcessWatch> watches_;  ///< by rank; empty watch for this rank
  PeerMappings mappings_;              ///< peers' mappable memory mapped here
  bool single_copy_;
  bool measured_choice_;
  std::uint64_t generation_ = 0;
  std::uint64_t eager_generation_ = 0;
  /// Every peer was seen done with every eager generation up to this one.
  std::uint64_t consumed_by_all_ = 0;
  std::uint64_t announcement_ = 0;
  std::string (*describe_)(std::uint64_t) = nullptr;
  std::uint64_t op_first_generation_ = UINT64_MAX;  ///< no announcement checked before begin_op
  std::uint64_t op_first_eager_ = UINT64_MAX;
  bool marked_ = false;  ///< the first mark's kind stays (mark_disagreed)
};

}  // namespace cohort::transport
