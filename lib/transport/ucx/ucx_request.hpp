#pragma once

// One UCX send or receive, owning the tri-state a ucp_*_nbx call returns: completed inline,
// failed inline, or pending (a UCX request that must be polled, then freed). A pending receive
// is cancelled before it is freed; that takes it back only while no message has matched it. A
// matched receive, and any send, go on after they are freed until UCX ends them: whoever gives
// up on one keeps its memory valid until then (UcxHub keeps such requests, abandoned_).

#include <ucp/api/ucp.h>

#include <cstddef>

namespace cohort::transport::ucx {

class UcxRequest {
 public:
  enum class Kind { Send, Recv };

  /// Posts a tagged send on `ep`. Never blocks.
  static UcxRequest send(ucp_worker_h worker, ucp_ep_h ep, const void* data, std::size_t bytes,
                         ucp_tag_t tag) noexcept;
  /// Posts a tagged receive matching exactly `tag` (full mask). Never blocks.
  static UcxRequest recv(ucp_worker_h worker, void* data, std::size_t bytes,
                         ucp_tag_t tag) noexcept;
  /// Receives a message taken from UCX's unexpected queue (ucp_tag_probe_nb with remove set)
  /// into `data`, which holds its `bytes`. Never blocks.
  static UcxRequest recv_message(ucp_worker_h worker, void* data, std::size_t bytes,
                                 ucp_tag_message_h message) noexcept;
  /// A request that failed before reaching UCX.
  static UcxRequest failed(Kind kind, ucs_status_t status) noexcept;
  /// A request that completed without UCX (its message went through a fastbox): poll() says
  /// UCS_OK and received_bytes() `received`.
  static UcxRequest completed(Kind kind, std::size_t received) noexcept;

  ~UcxRequest();
  UcxRequest(UcxRequest&& other) noexcept;
  UcxRequest& operator=(UcxRequest&& other) noexcept;
  UcxRequest(const UcxRequest&) = delete;
  UcxRequest& operator=(const UcxRequest&) = delete;

  /// UCS_INPROGRESS while pending; otherwise the final status. Does not progress the worker;
  /// frees the UCX request as soon as it has completed.
  ucs_status_t poll() noexcept;
  /// Bytes a completed receive got (valid once poll() returned UCS_OK).
  std::size_t received_bytes() const noexcept { return received_; }
  Kind kind() const noexcept { return kind_; }
  /// Completed successfully when it was posted (an eager send that left at once).
  bool succeeded_at_post() const noexcept { return pending_ == nullptr && status_ == UCS_OK; }
  /// Cancels a pending receive (a no-op for sends: UCX cannot cancel them; closing the endpoint
  /// completes them). The cancellation completes during a later progress.
  void cancel() noexcept;

 private:
  UcxRequest(Kind kind, ucp_worker_h worker) noexcept : kind_(kind), worker_(worker) {}
  /// Takes what a ucp_*_nbx call returned: a request to poll, an error, or (null) completion at
  /// once, recorded as `completed_at_once`.
  void take(ucs_status_ptr_t result, ucs_status_t completed_at_once) noexcept;
  void release() noexcept;

  Kind kind_;
  ucp_worker_h worker_;
  void* pending_ = nullptr;  // the UCX request while it is in flight
  ucs_status_t status_ = UCS_OK;
  std::size_t received_ = 0;
};

}  // namespace cohort::transport::ucx
