#pragma once

// The narrow interface algorithms move data through. Implementations: ucx/ (CPU, shared memory
// on one host, TCP/RDMA across hosts). Algorithms never see UCX; they post sends and receives,
// then wait on them with a deadline.
//
// Contract:
// - post_send/post_recv never block; a posted buffer must stay valid until the request completes
//   (wait returned, or test returned true).
// - Receives may be posted before or after the matching send; neither side may assume eager
//   completion. Messages with the same tag between one pair of ranks match in posting order.
// - A message larger than the posted receive is an error (Internal: a protocol bug).
// - wait() throws Error(Timeout) when the deadline passes, Error(RemoteError) when a peer died;
//   both messages name the peers whose requests were still pending. After such an error the
//   transport cancels nothing by itself: the caller calls cancel_all() (the communicator then
//   poisons itself).
// - One thread at a time per transport (the communicator serialises its callers). Transports
//   derived from one another may be driven from different threads at once.

#include "transport/side_work.hpp"
#include "transport/tag.hpp"
#include "transport/tag_ids.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

namespace cohort::transport {

using Deadline = std::chrono::steady_clock::time_point;

/// What is left of `deadline` from now, whole milliseconds rounded up (0 once it passed: a
/// store read given it only looks), for the calls that take a duration.
inline std::chrono::milliseconds time_left(Deadline deadline) {
  const auto left = deadline - std::chrono::steady_clock::now();
  if (left <= std::chrono::steady_clock::duration::zero()) return std::chrono::milliseconds(0);
  return std::chrono::ceil<std::chrono::milliseconds>(left);
}

/// Handle to one posted send or receive. Cheap to copy; stale handles (slot reused) are detected
/// by the generation.
struct Request {
  std::uint32_t slot = UINT32_MAX;
  std::uint32_t generation = 0;
  bool valid() const noexcept { return slot != UINT32_MAX; }
  /// What post_send returns for a message that left at once (its buffer may be reused): nothing
  /// is held for it, and wait() and test() take it as complete. A small send's common case, so
  /// it skips the request table.
  static constexpr Request completed() noexcept { return Request{UINT32_MAX - 1, 0}; }
  bool is_completed() const noexcept { return slot == UINT32_MAX - 1; }
  friend bool operator==(const Request&, const Request&) = default;
};

class Transport {
 public:
  virtual ~Transport() = default;

  virtual int rank() const noexcept = 0;
  virtual int size() const noexcept = 0;

  /// Sends `bytes` at `data` to `peer`. `tag` comes from op_tag()/p2p_tag() (source bits zero).
  /// May return Request::completed() when the message left at once.
  virtual Request post_send(int peer, const void* data, std::size_t bytes, Tag tag) = 0;
  /// Receives exactly `bytes` from `peer` into `data`.
  virtual Request post_recv(int peer, void* data, std::size_t bytes, Tag tag) = 0;
  /// Progresses until every request completed, or throws at the deadline / on a peer failure.
  /// `what` names the op for error messages ("allreduce #17 (ring)").
  virtual void wait(std::span<const Request> requests, Deadline deadline,
                    const std::string& what) = 0;
  /// Progresses once; true if `request` completed (and releases it). Throws on its failure.
  virtual bool test(const Request& request) = 0;
  /// Cancels and releases every pending request (after an error). Never throws. A request the
  /// transport cannot take back at once (a send in flight, whose receiver may still come and
  /// read it; a receive already being filled) goes on, and its memory must stay valid until it
  /// ends or the connections close: see retain_until_quiet().
  virtual void cancel_all() noexcept = 0;
  /// Keeps `keep` (the owners of a failed op's buffers) alive until no request of tag id
  /// `tag_id` (the op's communicator) that cancel_all() gave up on while it was still in flight,
  /// on these connections (every transport derived from them), can touch memory any more: those
  /// requests ended, or the connections closed. Dropped at once when there is none. Call once
  /// the failed op's requests were cancelled (cancel_all()). Never throws.
  virtual void retain_until_quiet(std::uint32_t tag_id, std::shared_ptr<void> keep) noexcept {
    (void)tag_id;
    keep.reset();
  }
  /// Communicator::abort() or another op's failure: every wait() on this transport, the one
  /// running on another thread included, throws Error(InvalidUsage) with `message` ("aborted:
  /// <reason>") within about a millisecond, and so does every later one. Irreversible;
  /// thread-safe; never throws.
  virtual void interrupt(const std::string& message) noexcept = 0;
  /// Who serves between the rounds of this transport's waits (side_work.hpp; null: nobody).
  /// Set before the first op, cleared before `side_work` goes; not while a wait runs.
  virtual void set_side_work(SideWork* side_work) noexcept = 0;
  /// Wakes a wait on this transport that sleeps, so it serves side work asked meanwhile (or
  /// looks at its interruption) now rather than after its nap. Any thread; never throws.
  virtual void wake_waiters() noexcept {}
  /// Short description for logs ("ucx posix,self").
  virtual std::string description() const = 0;
  /// Hardware threads this host's ranks may run on (the union of their affinity masks as each
  /// read its own when the connections were made, cpu_set.hpp), for the wait policy of whatever
  /// waits on this host. A derived transport answers for the ranks of the one it came from
  /// (a subset confined to fewer cores than the whole is not told apart).
  virtual unsigned host_cpus() const noexcept = 0;

  /// A transport over a subset of this one's ranks, sharing its connections: `members` are this
  /// transport's ranks in the new one's rank order, `rank` this process's place among them.
  /// Messages of the two are told apart by the tag id the caller passes in tags (`tag` holds it
  /// until the new transport goes; empty for a subset of one). Local: no communication.
  virtual std::unique_ptr<Transport> derive(std::span<const int> members, int rank,
                                            TagIdClaim tag) = 0;
  /// The tag ids in use on these connections, shared by every transport derived from them;
  /// null when messages never leave the process (a world of one).
  virtual std::shared_ptr<TagIdPool> tag_ids() const { return nullptr; }
};

}  // namespace cohort::transport
