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
// Cost on the op path: two record calls for an inline collective (started, then done or failed),
// three for a queued one. started, queued and failed take the recorder's own mutex, which only
// a dump ever contends for, write one preallocated slot of one cache line, and never allocate.
// The end of an op the executor's driver ran takes no lock (done_by_driver: a lock there, right
// after the op's last store into shared memory, waits for that store to reach the peer); its
// record is moved into the slot by the next locked call or dump. The slot of op `seq` is
// seq % N (computed without a division), so an update finds its slot without searching. All
// stamps come from the coarse clock (coarse_now()), as does the op's deadline, which is taken
// at the same moment as its start stamp.
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

  // ---- Recording: called by the executor, which serialises calls for one op. Never throw.

  /// Op `seq` was queued behind others (submit, or a blocking call that found work ahead).
  void queued(std::uint32_t seq, Collective kind, Algorithm forced, const OpShape& shape,
              std::chrono::milliseconds timeout, TimePoint now) noexcept;
  /// Op `seq` starts running (a fresh entry when it was never queued).
  void started(std::uint32_t seq, Collective kind, Algorithm forced, const OpShape& shape,
               std::chrono::milliseconds timeout, TimePoint now) noexcept;
  /// Op `seq` finished; `ran` is the algorithm that ran (Auto: not known). A `now` before the
  /// op's start (a coarse stamp) is taken as its start.
  void done(std::uint32_t seq, Algorithm ran, TimePoint now) noexcept;
  /// done() for the thread driving the executor, without the mutex: a lock right after an op's
  /// last store into shared memory stalls until that store has reached the peer's cache. The
  /// record is kept aside (one op's worth, seqlock-style) and moved into the op's entry by the
  /// next record call or dump. Called by one thread at a time (the driver), after started().
  void done_by_driver(std::uint32_t seq, Algorithm ran, TimePoint now) noexcept;
  /// Op `seq` failed with `error`: its peers are the ones it still waited for, its algorithm
  /// (when it names one) the one that was running.
  void failed(std::uint32_t seq, const Error& error, TimePoint now) noexcept;

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
  /// One collective, in a preallocated slot of one cache line (every op writes a fresh one);
  /// plain data, copied out whole by dumps. The peers a failure awaited are kept apart
  /// (AwaitedPeers), since only a failure writes them.
  struct alignas(64) Entry {
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
  /// The peers a failed op still waited for, beside its Entry (valid for peer_count of them).
  struct AwaitedPeers {
    static constexpr std::size_t kMaxPeers = 8;  // more are counted, not listed
    std::int32_t peers[kMaxPeers] = {};
  };
  static constexpr std::uint8_t kNone = 0xff;

  void fill(Entry& e, std::uint32_t seq, Collective kind, Algorithm forced, const OpShape& shape,
            std::chrono::milliseconds timeout) noexcept;
  /// The slot op `seq` goes in (seq % capacity, capacity > 0).
  Entry& slot_for(std::uint32_t seq) const noexcept;
  /// The slot holding op `seq`, or null when it was overwritten or never recorded (mutex_ held).
  Entry* slot_of(std::uint32_t seq) const noexcept;

  const RecorderIdentity identity_;
  const std::size_t capacity_;
  const std::string trace_dir_;
  std::unique_ptr<Entry[]> ring_;
  std::unique_ptr<AwaitedPeers[]> awaited_;  // slot for slot beside ring_
  const std::uint64_t remainder_magic_;
  /// The last done_by_driver() record. Its version is odd while the driver writes it; readers
  /// (record calls and dumps, under mutex_) take it only when the version is even and the same
  /// before and after they read the fields.
  struct LastDone {
    std::atomic<std::uint64_t> version{0};
    std::atomic<std::uint32_t> seq{0};
    std::atomic<Algorithm> ran{Algorithm::Auto};
    std::atomic<std::int64_t> finished_ns{0};
  };
  LastDone last_done_;
  /// The last_done_ version already in the ring (mutex_). Moving the record into the ring does
  /// not change what the recorder knows, so dumps (const) do it too.
  mutable std::uint64_t applied_version_ = 0;
  /// Moves last_done_ into its op's entry, if that entry still holds the op (mutex_ held).
  void apply_last_done_locked()
      const noexcept;           // 2^64 / capacity, rounded up: slot_for's multiplier
  mutable std::mutex mutex_;    // guards everything below and the ring's contents
  std::uint64_t recorded_ = 0;  // collectives ever recorded (the dump says how many were dropped)
  std::optional<Error> failure_;
};

}  // namespace cohort::comm
