#pragma once

// Transport over UCX tagged messaging: one worker per transport (so each communicator has its own
// matching queue), one endpoint per peer (itself included), requests in a generation-checked
// table. Peer failure: remote peers use UCX's peer-failure handling (error callback); same-host
// peers are connected without it, so UCX may use shared memory, and are watched through their
// pid instead. Either way a pending request with a failed peer fails with RemoteError in wait().

#include "transport/request_table.hpp"
#include "transport/transport.hpp"
#include "transport/tunables.hpp"
#include "transport/ucx/peer_address.hpp"
#include "transport/process_watch.hpp"
#include "transport/ucx/ucx_endpoint.hpp"
#include "transport/ucx/ucx_request.hpp"
#include "transport/ucx/ucx_worker.hpp"
#include "transport/wait_policy.hpp"

#include <cohort/store.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace cohort::transport::ucx {

class UcxTransport final : public Transport {
 public:
  /// Collective: publishes this rank's address under "<key_prefix>/addr/<rank>", reads every
  /// peer's (waiting up to `connect_timeout` for each), connects, and exchanges an empty message
  /// with every peer so all connections are fully established before the first op.
  UcxTransport(Store& store, const std::string& key_prefix, int rank, int size,
               int local_world_size, std::chrono::milliseconds connect_timeout);
  ~UcxTransport() override;
  UcxTransport(const UcxTransport&) = delete;
  UcxTransport& operator=(const UcxTransport&) = delete;

  int rank() const noexcept override { return rank_; }
  int size() const noexcept override { return size_; }
  Request post_send(int peer, const void* data, std::size_t bytes, Tag tag) override;
  Request post_recv(int peer, void* data, std::size_t bytes, Tag tag) override;
  void wait(std::span<const Request> requests, Deadline deadline, const std::string& what) override;
  bool test(const Request& request) override;
  void cancel_all() noexcept override;
  std::string description() const override;

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
    int peer;
    std::size_t bytes;  // expected size of a receive
    Tag tag;
    UcxRequest request;
  };

  /// Exchanges an empty message with every peer (see the .cpp for why).
  void handshake(std::chrono::milliseconds timeout);
  static void on_endpoint_error(void* arg, ucp_ep_h ep, ucs_status_t status) noexcept;
  void check_peer(int peer, const char* what) const;
  void check_liveness() noexcept;
  /// Polls one pending request: true when complete (throws on its failure, after releasing it;
  /// the message lists what is still pending among `all`).
  bool poll_request(const Request& request, Pending& pending, const std::string& what,
                    std::span<const Request> all);
  static std::string describe(const Pending& pending);
  /// "; still pending: receive from rank 2 (...), send to rank 3 (...)" or "".
  std::string pending_summary(std::span<const Request> requests);
  /// Sleeps on the worker's event fd and the same-host peers' pidfds, at most until `until`.
  void block_until(Deadline until);

  int rank_;
  int size_;
  WaitPolicy policy_;
  TransportTunables tunables_;
  UcxWorker worker_;
  std::vector<std::unique_ptr<Peer>> peers_;
  RequestTable<Pending> requests_;
  std::chrono::steady_clock::time_point last_liveness_check_{};
};

}  // namespace cohort::transport::ucx
