#include "transport/ucx/ucx_request.hpp"

#include <utility>

namespace cohort::transport::ucx {
namespace {

// UCX may dereference the buffer pointer even for zero bytes on some paths; give it a valid one.
char zero_byte_buffer;

}  // namespace

UcxRequest UcxRequest::send(ucp_worker_h worker, ucp_ep_h ep, const void* data, std::size_t bytes,
                            ucp_tag_t tag) noexcept {
  UcxRequest request(Kind::Send, worker);
  ucp_request_param_t param{};
  request.take(ucp_tag_send_nbx(ep, bytes ? data : &zero_byte_buffer, bytes, tag, &param), UCS_OK);
  return request;
}

UcxRequest UcxRequest::recv(ucp_worker_h worker, void* data, std::size_t bytes,
                            ucp_tag_t tag) noexcept {
  UcxRequest request(Kind::Recv, worker);
  // Always a request, never inline completion: UCX 1.13 leaves recv_info.tag_info's length at
  // 0 when a receive completes inline from an unexpected eager message, and the length is what
  // catches a sender that sent less than was posted.
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
  // Completed at once means NO_IMM_CMPL was not honoured: the length is unknown.
  request.take(
      ucp_tag_recv_nbx(worker, bytes ? data : &zero_byte_buffer, bytes, tag, ~ucp_tag_t{0}, &param),
      UCS_ERR_NO_PROGRESS);
  return request;
}

UcxRequest UcxRequest::recv_message(ucp_worker_h worker, void* data, std::size_t bytes,
                                    ucp_tag_message_h message) noexcept {
  UcxRequest request(Kind::Recv, worker);
  ucp_request_param_t param{};
  request.take(
      ucp_tag_msg_recv_nbx(worker, bytes ? data : &zero_byte_buffer, bytes, message, &param),
      UCS_OK);
  if (request.status_ == UCS_OK) request.received_ = bytes;
  return request;
}

UcxRequest UcxRequest::failed(Kind kind, ucs_status_t status) noexcept {
  UcxRequest request(kind, nullptr);
  request.status_ = status;
  return request;
}

UcxRequest UcxRequest::completed(Kind kind, std::size_t received) noexcept {
  UcxRequest request(kind, nullptr);
  request.received_ = received;
  return request;
}

void UcxRequest::take(ucs_status_ptr_t result, ucs_status_t completed_at_once) noexcept {
  if (result == nullptr) {
    status_ = completed_at_once;
  } else if (UCS_PTR_IS_ERR(result)) {
    status_ = UCS_PTR_STATUS(result);
  } else {
    pending_ = result;
    status_ = UCS_INPROGRESS;
  }
}

UcxRequest::~UcxRequest() {
  release();
}

UcxRequest::UcxRequest(UcxRequest&& other) noexcept
    : kind_(other.kind_),
      worker_(other.worker_),
      pending_(std::exchange(other.pending_, nullptr)),
      status_(other.status_),
      received_(other.received_) {}

UcxRequest& UcxRequest::operator=(UcxRequest&& other) noexcept {
  if (this != &other) {
    release();
    kind_ = other.kind_;
    worker_ = other.worker_;
    pending_ = std::exchange(other.pending_, nullptr);
    status_ = other.status_;
    received_ = other.received_;
  }
  return *this;
}

ucs_status_t UcxRequest::poll() noexcept {
  if (!pending_) return status_;
  ucs_status_t status;
  if (kind_ == Kind::Recv) {
    ucp_tag_recv_info_t info{};
    status = ucp_tag_recv_request_test(pending_, &info);
    if (status != UCS_INPROGRESS) received_ = info.length;
  } else {
    status = ucp_request_check_status(pending_);
  }
  if (status != UCS_INPROGRESS) {
    ucp_request_free(pending_);
    pending_ = nullptr;
  }
  status_ = status;
  return status;
}

void UcxRequest::cancel() noexcept {
  if (pending_ && kind_ == Kind::Recv) ucp_request_cancel(worker_, pending_);
}

void UcxRequest::release() noexcept {
  if (!pending_) return;
  // Still in flight: take a receive out of the matching queue first, then let UCX free the
  // request whenever it completes.
  cancel();
  ucp_request_free(pending_);
  pending_ = nullptr;
}

}  // namespace cohort::transport::ucx
