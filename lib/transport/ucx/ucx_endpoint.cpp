#include "transport/ucx/ucx_endpoint.hpp"

#include "core/log.hpp"
#include "transport/ucx/ucx_status.hpp"

#include <utility>
#include <vector>

namespace cohort::transport::ucx {

UcxEndpoint::UcxEndpoint(UcxWorker& worker, const std::vector<std::uint8_t>& address,
                         ucp_err_handler_cb_t on_error, void* arg)
    : worker_(&worker), handles_peer_failure_(on_error != nullptr) {
  ucp_ep_params_t params{};
  params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
  params.address = reinterpret_cast<const ucp_address_t*>(address.data());
  if (on_error) {
    params.field_mask |= UCP_EP_PARAM_FIELD_ERR_HANDLER;
    params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
    params.err_handler.cb = on_error;
    params.err_handler.arg = arg;
  } else {
    params.err_mode = UCP_ERR_HANDLING_MODE_NONE;
  }
  if (ucs_status_t status = ucp_ep_create(worker.get(), &params, &ep_); status != UCS_OK)
    throw ucx_error(status, "creating a UCX endpoint");
}

UcxEndpoint::~UcxEndpoint() {
  close_forced();
}

UcxEndpoint::UcxEndpoint(UcxEndpoint&& other) noexcept
    : worker_(other.worker_),
      ep_(std::exchange(other.ep_, nullptr)),
      handles_peer_failure_(other.handles_peer_failure_) {}

UcxEndpoint& UcxEndpoint::operator=(UcxEndpoint&& other) noexcept {
  if (this != &other) {
    close_forced();
    worker_ = other.worker_;
    ep_ = std::exchange(other.ep_, nullptr);
    handles_peer_failure_ = other.handles_peer_failure_;
  }
  return *this;
}

void UcxEndpoint::close_forced() noexcept {
  if (!ep_) return;
  UcxEndpoint* self = this;
  const bool force = true;
  close_all(*worker_, std::span<UcxEndpoint* const>(&self, 1), std::span<const bool>(&force, 1),
            std::chrono::steady_clock::now() + kForcedCloseTimeout);
}

namespace {

/// Progresses `worker` until every request of `pending` completed (each then freed) or
/// `deadline`; returns how many were still in flight then, their requests freed to UCX, which
/// releases them whenever they complete.
std::size_t progress_until(UcxWorker& worker, std::vector<void*> pending,
                           std::chrono::steady_clock::time_point deadline) noexcept {
  while (!pending.empty()) {
    worker.progress();
    std::erase_if(pending, [](void* request) {
      if (ucp_request_check_status(request) == UCS_INPROGRESS) return false;
      ucp_request_free(request);
      return true;
    });
    if (!pending.empty() && std::chrono::steady_clock::now() >= deadline) {
      for (void* request : pending) ucp_request_free(request);
      return pending.size();
    }
  }
  return 0;
}

/// Keeps a started operation's request, or logs why it could not start.
void keep(std::vector<void*>& pending, ucs_status_ptr_t result, const char* what) {
  if (UCS_PTR_IS_ERR(result))
    COHORT_LOG_DEBUG("{} a UCX endpoint: {}", what, ucs_status_string(UCS_PTR_STATUS(result)));
  else if (result != nullptr)
    pending.push_back(result);
}

}  // namespace

void UcxEndpoint::flush_all(UcxWorker& worker, std::span<UcxEndpoint* const> endpoints,
                            std::chrono::steady_clock::time_point deadline) noexcept {
  std::vector<void*> pending;
  for (UcxEndpoint* endpoint : endpoints) {
    if (!endpoint->ep_) continue;
    ucp_request_param_t param{};
    keep(pending, ucp_ep_flush_nbx(endpoint->ep_, &param), "flushing");
  }
  if (const std::size_t left = progress_until(worker, std::move(pending), deadline); left > 0)
    COHORT_LOG_DEBUG("{} UCX endpoint flush(es) did not finish in time", left);
}

void UcxEndpoint::close_all(UcxWorker& worker, std::span<UcxEndpoint* const> endpoints,
                            std::span<const bool> force,
                            std::chrono::steady_clock::time_point deadline) noexcept {
  std::vector<void*> pending;
  for (std::size_t i = 0; i < endpoints.size(); ++i) {
    UcxEndpoint& endpoint = *endpoints[i];
    if (!endpoint.ep_) continue;
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    param.flags = force[i] && endpoint.handles_peer_failure_ ? UCP_EP_CLOSE_FLAG_FORCE : 0;
    keep(pending, ucp_ep_close_nbx(std::exchange(endpoint.ep_, nullptr), &param), "closing");
  }
  if (const std::size_t left = progress_until(worker, std::move(pending), deadline); left > 0)
    COHORT_LOG_WARN(
        "{} UCX endpoint close(s) did not finish in time (peer gone?); leaving them "
        "to UCX",
        left);
}

}  // namespace cohort::transport::ucx
