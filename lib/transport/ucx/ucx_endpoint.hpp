#pragma once

// A UCX endpoint to one peer's worker. Closing needs the worker to progress (UCX flushes or
// force-releases in the background), so closes are started for all endpoints together and then
// progressed until done or a deadline: a dead peer can delay teardown, never hang it.

#include "transport/ucx/ucx_worker.hpp"

#include <ucp/api/ucp.h>

#include <chrono>
#include <cstdint>
#include <span>
#include <vector>

namespace cohort::transport::ucx {

class UcxEndpoint {
 public:
  /// How long a destructor-driven (forced) close may progress the worker.
  static constexpr std::chrono::milliseconds kForcedCloseTimeout{1000};

  UcxEndpoint() = default;
  /// Connects to the worker at `address`. With `on_error` set the endpoint uses peer-failure
  /// handling (UCP_ERR_HANDLING_MODE_PEER) and calls on_error(arg, ep, status) when the peer is
  /// lost; without it, no peer-failure handling (which lets UCX use shared memory).
  UcxEndpoint(UcxWorker& worker, const std::vector<std::uint8_t>& address,
              ucp_err_handler_cb_t on_error, void* arg);
  ~UcxEndpoint();
  UcxEndpoint(UcxEndpoint&& other) noexcept;
  UcxEndpoint& operator=(UcxEndpoint&& other) noexcept;
  UcxEndpoint(const UcxEndpoint&) = delete;
  UcxEndpoint& operator=(const UcxEndpoint&) = delete;

  ucp_ep_h get() const noexcept { return ep_; }
  bool open() const noexcept { return ep_ != nullptr; }

  /// Closes every open endpoint in `endpoints`: force[i] releases without flushing (peer gone;
  /// honoured only on endpoints with peer-failure handling, as UCX requires), otherwise
  /// outstanding operations are flushed first. Progresses `worker` until all closes
  /// finished or `deadline`; closes still unfinished then are logged and abandoned to UCX.
  /// Flushes every open endpoint in `endpoints` (what was sent leaves the transport's buffers;
  /// a rendezvous the peer has not answered is not waited for), progressing `worker` until all
  /// flushes finished or `deadline`.
  static void flush_all(UcxWorker& worker, std::span<UcxEndpoint* const> endpoints,
                        std::chrono::steady_clock::time_point deadline) noexcept;
  static void close_all(UcxWorker& worker, std::span<UcxEndpoint* const> endpoints,
                        std::span<const bool> force,
                        std::chrono::steady_clock::time_point deadline) noexcept;

 private:
  void close_forced() noexcept;
  UcxWorker* worker_ = nullptr;
  ucp_ep_h ep_ = nullptr;
  bool handles_peer_failure_ = false;
};

}  // namespace cohort::transport::ucx
