#pragma once

// UcxHub: one process's UCX connections to the ranks of a world: one worker (one tag-matching
// queue and progress engine), one endpoint per world rank (itself included), one table of
// requests. A world's communicator and every communicator split from it send through the same
// hub, each through a UcxTransport view that translates its ranks to world ranks; their messages
// are kept apart by the tag id in every tag (tag_ids.hpp). So a sub-communicator costs no worker,
// no endpoint and no handshake, and any thread progressing the worker moves every communicator's
// messages along.
//
// Peer failure: remote peers use UCX's peer-failure handling (error callback); same-host peers
// are connected without it, so UCX may use shared memory, and are watched through their pid
// instead. Either way a pending request with a failed peer fails with RemoteError in wait().
//
// Threads: every member function may be called from any thread. One mutex guards the worker,
// the endpoints' state and the table; wait() holds it for one progress round at a time and never
// while sleeping, so ops of different communicators driven from different threads (a blocking op
// on one, the progress thread of another) never wait on each other's locks for longer than a
// round. A thread that sleeps on the worker's event fd is woken when another thread's progress
// may have completed its requests.

#include "core/tunables.hpp"
#include "transport/interruption.hpp"
#include "transport/process_watch.hpp"
#include "transport/request_table.hpp"
#include "transport/tag_ids.hpp"
#include "transport/transport.hpp"
#include "transport/ucx/peer_address.hpp"
#include "transport/ucx/ucx_endpoint.hpp"
#include "transport/ucx/ucx_request.hpp"
#include "transport/ucx/ucx_worker.hpp"
#include "transport/wait_policy.hpp"

#include <cohort/store.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace cohort::transport::ucx {

class UcxHub {
 public:
  /// Collective over the world: publishes this rank's address under "<key_prefix>/addr/<rank>",
  /// reads every peer's (waiting up to `connect_timeout` for each), connects, and exchanges an
  /// empty message with every peer so all connections are fully established before the first op.
  /// `local_world_size` is how many of the world's ranks share this host (it sizes busy-polling).
  UcxHub(Store& store, const std::string& key_prefix, int rank, int size, int local_world_size,
         std::chrono::milliseconds connect_timeout);
  ~UcxHub();
  UcxHub(const UcxHub&) = delete;
  UcxHub& operator=(const UcxHub&) = delete;

  int rank() const noexcept { return rank_; }
  int size() const noexcept { return size_; }
  /// The tag ids of the communicators using this hub.
  const std::shared_ptr<TagIdPool>& tag_ids() const noexcept { return tag_ids_; }

  /// Who posts a request, for error messages and cancellation: the communicator's view, and the
  /// peer's rank as that communicator numbers it.
  struct Origin {
    const void* owner = nullptr;
    int peer_label = 0;
  };

  /// Sends to world rank `peer`; the tag's source bits are set to this rank's world rank.
  Request post_send(int peer, const void* data, std::size_t bytes, Tag tag, Origin origin);
  /// Receives from world rank `peer`.
  Request post_recv(int peer, void* data, std::size_t bytes, Tag tag, Origin origin);
  /// Transport::wait / test (see transport.hpp).
  /// `interruption` (may be null): checked every round; raised, the wait throws its error.
  void wait(std::span<const Request> requests, Deadline deadline, const std::string& what,
            const Interruption* interruption = nullptr);
  /// Wakes every thread sleeping in wait() so it looks at its interruption again. Never throws.
  void wake_sleepers() noexcept;
  bool test(const Request& request);
  /// Cancels and releases every pending request posted by `owner`. Never throws.
  void cancel_owned(const void* owner) noexcept;
  std::string description() const;

 private:
  struct Peer {
    int rank = -1;
    bool same_host = false;
    bool failed = false;
    std::string failure;  // why, once failed
    ProcessWatch watch;   // same-host peers only
    UcxEndpoint endpoint;
  };
  struct Pending {
    int peer;  // world rank
    Origin origin;
    std::size_t bytes;  // expected size of a receive
    Tag tag;
    UcxRequest request;
  };

  /// Exchanges an empty message with every peer (see the .cpp for why).
  void handshake(std::chrono::milliseconds timeout);
  static void on_endpoint_error(void* arg, ucp_ep_h ep, ucs_status_t status) noexcept;
  void check_peer(int peer, const char* what) const;
  // The members below are called with mutex_ held.
  void check_liveness() noexcept;
  /// Progresses the worker; wakes sleeping threads when something happened.
  void progress_locked() noexcept;
  /// Polls one pending request: true when complete (throws on its failure, after releasing it;
  /// the message lists what is still pending among `all`).
  bool poll_request(const Request& request, Pending& pending, const std::string& what,
                    std::span<const Request> all);
  static std::string describe(const Pending& pending);
  /// "; still pending: receive from rank 2 (...), send to rank 3 (...)" or "".
  std::string pending_summary(std::span<const Request> requests);
  /// Sleeps on the worker's event fd, the wake-up fd and the same-host peers' pidfds, at most
  /// until `until`, unless progress happened since `seen_epoch`. Takes the lock itself.
  void block_until(Deadline until, std::uint64_t seen_epoch);

  const int rank_;
  const int size_;
  WaitPolicy policy_;
  PeerErrorHandling err_handling_;
  std::shared_ptr<TagIdPool> tag_ids_;
  mutable std::mutex mutex_;
  UcxWorker worker_;
  std::vector<std::unique_ptr<Peer>> peers_;
  RequestTable<Pending> requests_;
  std::chrono::steady_clock::time_point last_liveness_check_{};
  /// Counts worker progress that did something (guarded), so a thread about to sleep can tell
  /// whether another thread completed its requests since it last looked.
  std::uint64_t progress_epoch_ = 0;
  int sleepers_ = 0;  // guarded: threads blocked in block_until
  int wake_fd_ = -1;  // eventfd written when progress happens while someone sleeps
};

}  // namespace cohort::transport::ucx
