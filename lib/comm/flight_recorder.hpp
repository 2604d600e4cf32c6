#pragma once

// The flight recorder: every communicator keeps its last N collectives (COHORT_TRACE_BUFFER,
// default 2000) in a fixed ring, and writes them out as JSON when something went wrong, so the
// ranks' records can be merged afterwards (cohort-trace) to say which rank was behind or called
// something else. torch's TORCH_NCCL_TRACE_BUFFER_SIZE + fr_trace is the model; the differences
// are that every dump is self-describing (rank, size, communicator, failure) and that the verdict
// is computed by the launcher, not left to the user.
//
// What is recorded per collective: its sequence number, the collective, dtype, element count,
// reduce op and root, the forced algorithm (replaced by the one that ran once it finished), its
// timeout, its state (queued -> started -> done | failed) with a timestamp for each step, and on
// failure the peers it was still waiting for (as the error names them). Point-to-point ops are
// not recorded: their numbering differs per rank, so they cannot be compared across ranks; a
// failed send or receive still appears as the dump's failure.
//
// Two rings, by who writes them:
// - The driver's ring: the ops the executor runs (started, done, failed). Only the thread
//   driving the executor writes it, one driver at a time, so it takes no lock and no locked
//   instruction: each slot is a seqlock (an odd version while written, plain stores on x86),
//   which dumps read around. A locked instruction anywhere on a tiny op's path stalls until the
//   previous op's last store into shared memory has reached the peer's cache; with the
//   executor's claim free of them too (executor.hpp), a 2-rank 8 B broadcast went from
//   0.30-0.34 to 0.25-0.28 us.
// - The side ring, under the recorder's mutex: ops queued behind others (any thread, before
//   the driver takes them) and ops run outside the executor (device ops on a stream, whose
//   start and end come from whichever thread sees them).
// A dump merges the two: an op the driver started is shown from its ring (queued time
// included, handed over by the executor), a queued op from the side ring until then. The slot
// of op `seq` is seq % N in either ring (computed without a division), so a record finds its
// slot without searching. All stamps come from the coarse clock (coarse_now()), as does the
// op's deadline, which is taken at the same moment as its start stamp.
//
// When a dump is written (see dump()):
// - on the communicator's first failure that poisons it (a timeout, a dead peer, abort()), when
//   COHORT_TRACE_DIR is set;
// - on SIGUSR1, when COHORT_TRACE_DIR is set: the first recorder created with a trace directory
//   installs a handler, unless the application already handles SIGUSR1. The handler only writes
//   a byte to a pipe; a thread of the recorder's own dumps every live recorder from there
//   (formatting JSON and writing files are not async-signal-safe);
// - on request (Communicator::dump_trace()), anywhere, with or without COHORT_TRACE_DIR.
// Without COHORT_TRACE_DIR failures write nothing, as with torch: a job never leaves files it was
// not asked for (cohort-run sets the variable for its ranks).
//
// File: <dir>/cohort-trace.<job id, or the pid without one>.comm<id>.rank<r>.json, written to a
// temporary name and renamed, so a reader never sees half a dump.

#include <cohort/algorithm.hpp>
#include <cohort/dtype.hpp>
#include <cohort/error.hpp>

#include "algorithms/args.hpp"

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cohort::comm {

/// A collective's arguments as the flight record shows them, read on the caller's thread.
struct OpShape {
  std::optional<DType> dtype;         ///< unset for barrier
  std::optional<ReduceOp> reduce_op;  ///< reducing collectives only
  int root = -1;                      ///< -1 for rootless collectives
  /// Elements per rank for the uniform forms (what every rank must agree on); the total of the
  /// counts array for the v-forms (alltoallv: this rank's send total, which may differ by rank).
  std::uint64_t count = 0;
};

/// The shape of one collective's validated arguments (as fingerprint_of reads them).
template <class Args>
OpShape shape_of(const Args& args) {
  OpShape shape;
  if constexpr (requires { args.dtype; }) shape.dtype = args.dtype;
  if constexpr (requires { args.op; }) shape.reduce_op = args.op;
  if constexpr (requires { args.root; }) shape.root = args.root;
  if constexpr (requires { args.count; }) shape.count = args.count;
  if constexpr (requires { args.variable; })
    shape.count = args.variable ? args.total : (args.counts.empty() ? 0 : args.counts[0]);
  if constexpr (requires { args.uniform; })
    shape.count =
        args.uniform ? (args.send_counts.empty() ? 0 : args.send_counts[0]) : args.send_total;
  return shape;
}

/// Where an op is in its life. Empty marks a slot never written.
enum class OpState : std::uint8_t { Empty, Queued, Started, Done, Failed };

/// "queued", "started", "done", "failed" (the dump's spelling).
std::string_view op_state_name(OpState state) noexcept;

/// Why a dump was written: "failure", "signal", "request" in the file.
enum class DumpReason : std::uint8_t { Failure, Signal, Request };

/// Which communicator a recorder belongs to; goes into every dump and its file name.
struct RecorderIdentity {
  std::string job_id;  ///< the launcher's job id; empty: the pid names the file
  std::uint32_t communicator = 0;
  int rank = 0;
  int size = 1;
};

class FlightRecorder {
 public:
  /// Capacity and directory come from the tunables (COHORT_TRACE_BUFFER, COHORT_TRACE_DIR) as
  /// they are now. Capacity 0 records nothing (dumps then list no ops).
  explicit FlightRecorder(RecorderIdentity identity);
  /// The same with an explicit capacity and directory (empty: none), for tests.
  FlightRecorder(RecorderIdentity identity, std::size_t capacity, std::string trace_dir);
  /// Waits for a signal-triggered dump of this recorder that is under way. Never throws.
  ~FlightRecorder();
  FlightRecorder(const FlightRecorder&) = delete;
  FlightRecorder& operator=(const FlightRecorder&) = delete;

  using TimePoint = std::chrono::steady_clock::time_point;

  /// steady_clock's time read from the kernel's tick-granular clock (CLOCK_MONOTONIC_COARSE: a
  /// few nanoseconds instead of tens, at a resolution of one tick, 1-4 ms). For every stamp
  /// the op path takes. A stamp a tick late says nothing wrong about a hang.
  static TimePoint coarse_now() noexcept;

  // ---- The driver's records: only the thread driving the executor, one call at a time, each
  // driver's calls happening before the next driver's. No lock, no allocation; never throw.

  /// Op `seq` starts running on the driver; `queued_at` is when it was queued (the epoch: run
  /// without waiting in the queue).
  void started(std::uint32_t seq, Collective kind, Algorithm forced, const OpShape& shape,
               std::chrono::milliseconds timeout, TimePoint now,
               TimePoint queued_at = TimePoint{}) noexcept;
  /// Op `seq` finished; `ran` is the algorithm that ran (Auto: not known). A `now` before the
  /// op's start (a coarse stamp) is taken as its start. Nothing when its slot holds another op.
  void done(std::uint32_t seq, Algorithm ran, TimePoint now) noexcept;
  /// Op `seq` failed with `error`: its peers are the ones it still waited for, its algorithm
  /// (when it names one) the one that was running.
  void failed(std::uint32_t seq, const Error& error, TimePoint now) noexcept;

  // ---- The side records: any thread (they take the recorder's mutex). Never throw.

  /// Op `seq` was queued behind others; the driver's started() takes over when it runs.
  void queued(std::uint32_t seq, Collective kind, Algorithm forced, const OpShape& shape,
              std::chrono::milliseconds timeout, TimePoint now) noexcept;
  /// An op run outside the executor (a device op on its stream) started, ended, or failed.
  void external_started(std::uint32_t seq, Collective kind, Algorithm forced, const OpShape& shape,
                        std::chrono::milliseconds timeout, TimePoint now) noexcept;
  void external_done(std::uint32_t seq, TimePoint now) noexcept;
  void external_failed(std::uint32_t seq, const Error& error, TimePoint now) noexcept;

  // ---- Dumping: any thread, any time (an op may be running or stuck on another thread).

  /// The communicator failed with `cause`. The first call keeps it for every later dump and,
  /// when a trace directory is configured, writes a dump there; later calls do nothing. Never
  /// throws: a dump that cannot be written is logged.
  void record_failure(const Error& cause) noexcept;
  /// Writes the record as JSON to `path`, or when `path` is empty to default_path() (its
  /// directory is created when missing). Returns the path written. Throws Error(SystemError)
  /// when the file cannot be written.
  std::string dump(const std::string& path, DumpReason reason) const;
  /// The record as the dump's JSON text (what dump() writes).
  std::string to_json(DumpReason reason) const;
  /// <COHORT_TRACE_DIR, else the temp dir>/cohort-trace.<job or pid>.comm<id>.rank<r>.json
  std::string default_path() const;
  /// The trace directory this recorder dumps to on failures and signals; empty: none.
  const std::string& trace_dir() const noexcept { return trace_dir_; }
  std::size_t capacity() const noexcept { return capacity_; }

 private:
  /// One collective as a dump shows it (a side-ring slot holds one under the mutex; driver
  /// slots are copied out into one). The peers a failure awaited are kept apart (AwaitedPeers),
  /// since only a failure writes them.
  struct Entry {
    std::uint32_t seq = 0;
    OpState state = OpState::Empty;
    Collective kind = Collective::Barrier;
    Algorithm algorithm = Algorithm::Auto;
    std::uint8_t dtype = kNone;
    std::uint8_t reduce_op = kNone;
    std::uint8_t peer_count = 0;  // peers listed in the slot's AwaitedPeers
    std::int32_t root = -1;
    std::uint32_t peers_total = 0;  // peers the error named (may exceed kMaxPeers)
    std::uint64_t count = 0;
    std::int64_t timeout_ms = 0;
    std::int64_t queued_ns = 0, started_ns = 0, finished_ns = 0;  // steady clock; 0: not yet
  };
  static constexpr std::size_t kMaxPeers = 8;  // more are counted, not listed
  struct AwaitedPeers {
    std::int32_t peers[kMaxPeers] = {};
  };
  static constexpr std::uint8_t kNone = 0xff;

  /// A slot of the driver's ring: Entry's fields as relaxed atomics (plain moves on x86) under
  /// a seqlock version, odd while the driver writes them. One cache line.
  struct alignas(64) DriverSlot {
    std::atomic<std::uint32_t> version{0};
    std::atomic<std::uint32_t> seq{0};
    std::atomic<OpState> state{OpState::Empty};
    std::atomic<Collective> kind{Collective::Barrier};
    std::atomic<Algorithm> algorithm{Algorithm::Auto};
    std::atomic<std::uint8_t> dtype{kNone};
    std::atomic<std::uint8_t> reduce_op{kNone};
    std::atomic<std::uint8_t> peer_count{0};
    std::atomic<std::int32_t> root{-1};
    std::atomic<std::uint32_t> peers_total{0};
    std::atomic<std::uint64_t> count{0};
    std::atomic<std::int64_t> timeout_ms{0};
    std::atomic<std::int64_t> queued_ns{0}, started_ns{0}, finished_ns{0};
  };
  /// A driver slot's awaited peers, under the same slot's version.
  struct DriverPeers {
    std::atomic<std::int32_t> peers[kMaxPeers] = {};
  };
  /// Writes one driver slot: the version is odd from construction to destruction.
  class SlotWrite;
  /// An Entry copied out of the driver's ring, with its peers.
  struct Copied {
    Entry e;
    AwaitedPeers awaited;
  };

  static void fill(Entry& e, std::uint32_t seq, Collective kind, Algorithm forced,
                   const OpShape& shape, std::chrono::milliseconds timeout) noexcept;
  /// seq % capacity (capacity > 0).
  std::size_t index_of(std::uint32_t seq) const noexcept;
  /// The side slot holding op `seq`, or null when it was overwritten or never recorded
  /// (mutex_ held).
  Entry* side_slot_of(std::uint32_t seq) noexcept;
  /// The peers and algorithm `error` names, into `e` and `awaited`.
  static void note_failure(Entry& e, AwaitedPeers& awaited, const Error& error,
                           std::int64_t finished_ns) noexcept;
  /// Copies the driver's ring out, whole entries without a gap in their numbers, and appends
  /// them to `out`. Returns the number up to which the copy covers what the driver started
  /// (queued records up to it are stale), or nothing when it never started an op.
  std::optional<std::uint32_t> copy_driver_ring(std::vector<Copied>& out) const;

  const RecorderIdentity identity_;
  const std::size_t capacity_;
  const std::string trace_dir_;
  const std::uint64_t remainder_magic_;  // 2^64 / capacity, rounded up: index_of's multiplier
  std::unique_ptr<DriverSlot[]> driver_ring_;
  std::unique_ptr<DriverPeers[]> driver_peers_;  // slot for slot beside driver_ring_
  /// The driver's newest started op, and whether it started any: a queued record of an op at
  /// or before it is stale (collectives the executor runs start in sequence order). Written by
  /// the driver only, read by dumps.
  std::atomic<std::uint32_t> started_through_{0};
  std::atomic<bool> started_any_{false};
  /// Ops the driver recorded that never were queued (written by the driver only).
  std::atomic<std::uint64_t> driver_recorded_{0};

  mutable std::mutex mutex_;  // guards everything below
  std::unique_ptr<Entry[]> side_ring_;
  std::unique_ptr<AwaitedPeers[]> side_awaited_;  // slot for slot beside side_ring_
  std::uint64_t side_recorded_ = 0;               // queued and external ops ever recorded
  std::optional<Error> failure_;
};

}  // namespace cohort::comm
