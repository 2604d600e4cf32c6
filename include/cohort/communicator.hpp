#pragma once

/// Communicator: a group of ranks that run collectives together, in the same order on every
/// rank (MPI/NCCL semantics). Every collective has a blocking form and an *_async form returning
/// a Work. Arguments are validated before any byte moves; what must agree across ranks (count,
/// dtype, op, root) is verified by exchanging a fingerprint when COHORT_DEBUG=detail.
///
/// A collective that moves nothing (every count 0, which every rank can tell from the counts it
/// must pass alike; not alltoallv, whose counts differ per rank, nor barrier) returns on each rank
/// at once, after its arguments are checked, as MPI's and NCCL's zero-count calls do: it takes
/// no sequence number, leaves no flight record, waits for no peer and is not ordered behind
/// earlier *_async ops (its Work is complete when returned), on host or device buffers alike. On a
/// poisoned communicator it fails like any op. Under COHORT_DEBUG=detail it takes a number and
/// compares the ranks' arguments like any other op (and does nothing else, on host or device
/// buffers), so that a rank passing 0 where another passes N is named; without it that rank returns
/// and its next collective meets the others' N-element one, which may end in a wrong result rather
/// than an error.
///
/// A timeout or a dead peer fails the op with an Error naming the op, its sequence number and the
/// peers not heard from; the communicator is then poisoned and later ops fail fast with that cause.
/// What a failed op left in flight may go on after it failed: a send whose receiver comes late is
/// still read, a receive the transport had begun filling is still written, until that transfer
/// ends or the connections close (the last communicator sharing them is destroyed). cohort keeps
/// the owners of the op's buffers (Buffer::owner(): imported tensors, Buffer::allocate) that
/// long, whatever the caller does with its Buffers and Works; memory under a plain view (no
/// owner) the caller must keep as long.
///
/// Devices. Where an op's buffers live decides its path:
/// - cpu and cuda_host (pinned) buffers are host memory: UCX and the shared arena carry them.
/// - cuda and cuda_managed buffers run on NCCL, on that CUDA device. The communicator's NCCL
///   communicator is created on its first GPU op (collectively: every rank's first GPU op is the
///   same op; rank 0 publishes NCCL's unique id through the store) and bound to that op's
///   device: one device per communicator and rank. For another device, dup() before the first
///   GPU op: a split() or dup() of a communicator already bound shares its device (its NCCL
///   communicator comes from ncclCommSplit of the parent's).
/// - An op mixing host and device buffers, or a device other than the bound one, is
///   InvalidArgument naming both; a dtype or reduce op NCCL lacks (int16, bool, bitwise ops,
///   integer avg, fp8 before NCCL 2.24) is Unsupported. Both are refused on the caller's thread
///   before anything is queued, and leave the communicator usable.
/// - Stream order. With CollectiveOptions::stream, the op is queued on that stream: it runs after
///   the work already queued there, and work queued there later runs after it. Without one, it
///   is queued on the communicator's own stream after everything queued on the device's legacy
///   default stream. Either way the blocking form returns once the data is in place (the host
///   waits, polling, against the op's deadline), and *_async returns as soon as the op is queued;
///   its Work's wait()/test() observe completion on the host and make_stream_wait() orders
///   another stream after it without blocking the host.
/// - A GPU op that times out or whose NCCL communicator reports an error aborts the NCCL
///   communicator (ncclCommAbort) and poisons this communicator, naming the op and its sequence
///   number, even when nobody waits on its Work (a watchdog polls outstanding GPU ops).
/// - Under COHORT_DEBUG=detail a collective on device buffers first compares the ranks' arguments
///   over the host connections (a host op of its own number, in the flight record too; a
///   mismatch is InvalidArgument before anything is queued on the device). *_async ones too: in
///   that debugging mode they wait for every rank's call before they return.
/// - Point-to-point on device buffers matches in call order per pair of ranks (NCCL has no
///   tags; the tag is still validated). barrier() runs on NCCL (a one-element allreduce) when
///   given a stream, on the host path otherwise. Forced host algorithms do not apply to device
///   buffers (they decline, and NCCL runs).

#include <cohort/algorithm.hpp>
#include <cohort/buffer.hpp>
#include <cohort/dtype.hpp>
#include <cohort/environment.hpp>
#include <cohort/error.hpp>
#include <cohort/store.hpp>
#include <cohort/stream.hpp>
#include <cohort/work.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>

namespace cohort {

/// Per-op knobs; the defaults come from the communicator.
struct CollectiveOptions {
  /// Deadline for the whole op. Default: the communicator's (COHORT_TIMEOUT seconds, 600).
  /// Positive and at most kMaxTimeout (one year), or the op is refused (InvalidArgument).
  std::optional<std::chrono::milliseconds> timeout;
  /// Force an algorithm; if it declines (unsupported arguments) selection falls through. The
  /// same on every rank, as every argument of a collective.
  Algorithm algorithm = Algorithm::Auto;
  /// For device buffers: the CUDA stream to queue the op on (see "Stream order" above). Must be
  /// a stream of the buffers' device. Ignored by ops on host buffers.
  std::optional<Stream> stream;
};

struct CommunicatorOptions {
  /// Default op timeout, and create()'s own deadline: every stage of connecting (agreeing on the
  /// id, each peer's address, the handshakes) shares it, so create() returns or throws Timeout
  /// within it (plus the store's reply grace). Unset: COHORT_TIMEOUT (seconds) or 600 s.
  /// Positive and at most kMaxTimeout (one year).
  std::optional<std::chrono::milliseconds> timeout;
};

class Communicator : public std::enable_shared_from_this<Communicator> {
 public:
  /// Collective over all ranks of `env`: wires the transport through `store`.
  static std::shared_ptr<Communicator> create(const Environment& env, std::shared_ptr<Store> store,
                                              const CommunicatorOptions& options = {});
  /// In a process fork()ed after the communicator was made, the copy is unusable and its
  /// destruction does nothing: the threads, connections and shared rings it names are the
  /// parent's (the child's exit frees its memory).
  virtual ~Communicator();

  int rank() const noexcept;
  int size() const noexcept;
  /// Unique id of this communicator within the job (0 for the world).
  std::uint32_t id() const noexcept;
  std::chrono::milliseconds default_timeout() const noexcept;

  /// Pass as color to split() to stay out of every new group.
  static constexpr int kNoColor = -1;
  /// Collective: ranks passing the same color form a new communicator, ordered by (key, old rank).
  /// Returns null for ranks that passed kNoColor. Cheap: one allgather over this communicator;
  /// the new one shares this one's connections (no new UCX worker, endpoint or thread; a thread
  /// starts on its first *_async op) and sets up a shared arena on its first collective that uses
  /// one. Communicators may be destroyed in any order (a parent before its children included).
  /// Splits of different communicators may run on different threads at once.
  std::shared_ptr<Communicator> split(int color, int key);
  /// Collective: split(0, rank()): a new communicator over the same ranks, with its own tag
  /// space and op order.
  std::shared_ptr<Communicator> dup();

  // ---- State.

  /// Fails this communicator at once, on this rank: the op running on another thread fails
  /// within a polling round (about a millisecond; within 100 ms for a first GPU op still setting
  /// NCCL up) with Error(InvalidUsage) naming the reason,
  /// and every queued, in-flight and later op fails with "communicator <id> was aborted:
  /// <reason>" instead of waiting out its deadline. Thread-safe and never throws; the
  /// communicator can then only be destroyed (which no longer waits for peers). It is local:
  /// peers learn of it as they would of any silent rank (their own timeout, or their abort()).
  /// Sub-communicators are not aborted with it. Not async-signal-safe: from a signal handler,
  /// hand the request to a thread (a self-pipe) and call it there.
  void abort(const std::string& reason = "abort() was called") noexcept;
  /// Whether an earlier failure (timeout, dead peer, abort()) made this communicator unusable.
  bool is_poisoned() const;
  /// That failure's error, without running an op; nullopt while the communicator is usable.
  std::optional<Error> error() const;

  /// Writes this rank's flight record of this communicator as JSON and returns the file's path: its
  /// last COHORT_TRACE_BUFFER (default 2000) collectives (not those skipped as moving nothing),
  /// each with its sequence number, collective, dtype, count, reduce op, root, algorithm, state
  /// (queued, started, done, failed), timestamps and, for a failed one, the peers it still waited
  /// for; plus the failure that poisoned the communicator, if any. `path` empty:
  /// "<COHORT_TRACE_DIR, else the temp dir>/cohort-trace.<job id, else
  /// pid>.comm<id>.rank<rank>.json" (the directory is created when missing); otherwise exactly
  /// `path`. The file appears whole (written aside, then renamed). `cohort-trace` merges the ranks'
  /// files into a verdict.
  ///
  /// Local, not collective: each rank writes its own. Thread-safe, callable at any time,
  /// including while an op is running or stuck on another thread and after a failure. Throws
  /// Error(SystemError) when the file cannot be written. Records are also dumped without a call:
  /// on the first failure that poisons the communicator and on SIGUSR1, both only when
  /// COHORT_TRACE_DIR is set (SIGUSR1 only if the application has no handler of its own).
  std::string dump_trace(const std::string& path = {}) const;

  // ---- Collectives. `in` is never written; `out` must not be read-only. Counts are elements.
  // Unless stated otherwise in/out have the same dtype and device, and must be contiguous.

  /// out = op over all ranks of in. in and out have equal counts; they may be the same buffer.
  void allreduce(const Buffer& in, const Buffer& out, ReduceOp op, const CollectiveOptions& = {});
  void allreduce(const Buffer& inout, ReduceOp op, const CollectiveOptions& o = {}) {
    allreduce(inout, inout, op, o);
  }
  Work allreduce_async(const Buffer& in, const Buffer& out, ReduceOp op,
                       const CollectiveOptions& = {});

  /// out (every rank) = in (root). in is read on root only; in and out may be the same buffer.
  void broadcast(const Buffer& in, const Buffer& out, int root, const CollectiveOptions& = {});
  void broadcast(const Buffer& inout, int root, const CollectiveOptions& o = {}) {
    broadcast(inout, inout, root, o);
  }
  Work broadcast_async(const Buffer& in, const Buffer& out, int root,
                       const CollectiveOptions& = {});

  /// out (root only) = op over all ranks of in. out is ignored on other ranks (may be empty).
  void reduce(const Buffer& in, const Buffer& out, ReduceOp op, int root,
              const CollectiveOptions& = {});
  Work reduce_async(const Buffer& in, const Buffer& out, ReduceOp op, int root,
                    const CollectiveOptions& = {});

  /// out = concat of every rank's in (out.count == size * in.count). In-place when in is the
  /// rank's own slice of out (in.data == out.data + rank * in.nbytes).
  void allgather(const Buffer& in, const Buffer& out, const CollectiveOptions& = {});
  Work allgather_async(const Buffer& in, const Buffer& out, const CollectiveOptions& = {});
  /// Rank r contributes counts[r] elements; out is their concatenation (sum(counts)). Every rank
  /// passes the same counts (for the v-collectives below too, unlike MPI's, where only the root's
  /// matter).
  void allgatherv(const Buffer& in, const Buffer& out, std::span<const std::size_t> counts,
                  const CollectiveOptions& = {});
  Work allgatherv_async(const Buffer& in, const Buffer& out, std::span<const std::size_t> counts,
                        const CollectiveOptions& = {});

  /// out (root only, size * in.count) = concat of every rank's in.
  void gather(const Buffer& in, const Buffer& out, int root, const CollectiveOptions& = {});
  Work gather_async(const Buffer& in, const Buffer& out, int root, const CollectiveOptions& = {});
  void gatherv(const Buffer& in, const Buffer& out, std::span<const std::size_t> counts, int root,
               const CollectiveOptions& = {});
  Work gatherv_async(const Buffer& in, const Buffer& out, std::span<const std::size_t> counts,
                     int root, const CollectiveOptions& = {});

  /// out (every rank) = slice `rank` of root's in (in.count == size * out.count on root).
  void scatter(const Buffer& in, const Buffer& out, int root, const CollectiveOptions& = {});
  Work scatter_async(const Buffer& in, const Buffer& out, int root, const CollectiveOptions& = {});
  void scatterv(const Buffer& in, const Buffer& out, std::span<const std::size_t> counts, int root,
                const CollectiveOptions& = {});
  Work scatterv_async(const Buffer& in, const Buffer& out, std::span<const std::size_t> counts,
                      int root, const CollectiveOptions& = {});

  /// out = slice `rank` of (op over all ranks of in); in.count == size * out.count. In-place when
  /// out is the rank's own slice of in.
  void reduce_scatter(const Buffer& in, const Buffer& out, ReduceOp op,
                      const CollectiveOptions& = {});
  Work reduce_scatter_async(const Buffer& in, const Buffer& out, ReduceOp op,
                            const CollectiveOptions& = {});

  /// Slice j of in goes to rank j, arriving as slice `rank` of its out. in and out have equal
  /// counts, divisible by size. in and out may be the same buffer.
  void alltoall(const Buffer& in, const Buffer& out, const CollectiveOptions& = {});
  Work alltoall_async(const Buffer& in, const Buffer& out, const CollectiveOptions& = {});
  /// send_counts[j] elements go to rank j; recv_counts[j] arrive from rank j (packed in order).
  void alltoallv(const Buffer& in, std::span<const std::size_t> send_counts, const Buffer& out,
                 std::span<const std::size_t> recv_counts, const CollectiveOptions& = {});
  Work alltoallv_async(const Buffer& in, std::span<const std::size_t> send_counts,
                       const Buffer& out, std::span<const std::size_t> recv_counts,
                       const CollectiveOptions& = {});

  void barrier(const CollectiveOptions& = {});
  Work barrier_async(const CollectiveOptions& = {});

  /// Point-to-point. Messages between a pair with the same tag arrive in send order. tag >= 0.
  /// A send may complete before its receive is posted (MPI's standard mode): between ranks of
  /// one host, messages up to 32 KiB are copied into the receiver's shared-memory ring, or
  /// UCX's, and held on the receiving side until their receive comes, without a limit on how
  /// many; those of 32-512 KiB too (one larger than the ring, about 256 KiB, once the receiver's
  /// process has taken its first part), unless the pair measured its rendezvous faster for
  /// their size (COHORT_MEASURED_CHOICE; its first trials of a size go each way), in which case
  /// they wait for their receive, as larger ones do. A program must not rely on either: a send
  /// may also wait for its receive at any size (a full ring, another transport). Sends to a peer
  /// and receives from it are ordered per tag, not across tags.
  /// On host buffers, sends and receives do not wait for the collectives called before them
  /// (MPI's progress rule): one called while an earlier collective is queued or running (an
  /// unfinished *_async one, or another thread's) is posted from inside that collective's
  /// waits, and polled there until it completes or the collective ends. So a peer whose send
  /// must end before it joins that collective (a pipeline stage) is not left waiting. Except
  /// when they share memory: a send reading what an unfinished *_async collective writes, or a
  /// receive writing what it reads or writes, waits for it (allreduce_async(x, x) then
  /// send_async(x) sends the sum), and the sends and receives after it wait with it. Collectives
  /// run one at a time in call order; sends and receives keep their call order among
  /// themselves. On device buffers every op, point-to-point included, is queued on its stream
  /// in call order (as NCCL does), each send and receive on its own: two ranks that each call
  /// send_async() then recv() to the other queue a send ahead of their receive, and once the
  /// message outgrows NCCL's buffers both sends wait for receives queued behind them. Exchange
  /// with sendrecv() there (one NCCL group), or on different streams.
  void send(const Buffer& in, int peer, int tag = 0, const CollectiveOptions& = {});
  void recv(const Buffer& out, int peer, int tag = 0, const CollectiveOptions& = {});
  Work send_async(const Buffer& in, int peer, int tag = 0, const CollectiveOptions& = {});
  Work recv_async(const Buffer& out, int peer, int tag = 0, const CollectiveOptions& = {});
  /// MPI_Sendrecv: sends `in` to `dest` and receives `out` from `source`, both on `tag`, posted
  /// together (the receive first) and returning once both ended, so a ring or halo exchange
  /// cannot deadlock on itself. `in` and `out` must not overlap and must both be host memory or
  /// both on the communicator's device (InvalidArgument otherwise, before anything is posted).
  /// On host buffers the pair is posted and waited for in one transport wait (behind other ops:
  /// as two transfers); on device buffers both halves go in one NCCL group on the op's stream. Both
  /// halves have ended when it returns, whatever happened; a failure is reported by its first
  /// cause (the half that failed, not the other, failed by the poisoning). Device sendrecvs are
  /// numbered and named as sends.
  void sendrecv(const Buffer& in, int dest, const Buffer& out, int source, int tag = 0,
                const CollectiveOptions& = {});

  struct Impl;

 protected:
  explicit Communicator(std::unique_ptr<Impl> impl);

 private:
  std::unique_ptr<Impl> impl_;
};

struct InitOptions {
  EnvironmentConfig environment;
  CommunicatorOptions communicator;
};

/// One call for the world: resolves the environment, connects the store, creates the communicator.
std::shared_ptr<Communicator> init(const InitOptions& options = {});

}  // namespace cohort
