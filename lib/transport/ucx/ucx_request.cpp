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
  const ucs_status_ptr_t result =
      ucp_tag_send_nbx(ep, bytes ? data : &zero_byte_buffer, bytes, tag, &param);
  if (result == nullptr) {
    request.status_ = UCS_OK;
  } else if (UCS_PTR_IS_ERR(result)) {
    request.status_ = UCS_PTR_STATUS(result);
  } else {
    request.pending_ = result;
    request.status_ = UCS_INPROGRESS;
  }
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
  const ucs_status_ptr_t result =
      ucp_tag_recv_nbx(worker, bytes ? data : &zero_byte_buffer, bytes, tag, ~ucp_tag_t{0}, &param);
  if (result == nullptr) {
    request.status_ = UCS_ERR_NO_PROGRESS;  // NO_IMM_CMPL not honoured: the length is unknown
  } else if (UCS_PTR_IS_ERR(result)) {
    request.status_ = UCS_PTR_STATUS(result);
  } else {
    request.pending_ = result;
    request.status_ = UCS_INPROGRESS;
  }
  return request;
}

UcxRequest UcxRequest::recv_message(ucp_worker_h worker, void* data, std::size_t bytes,
                                    ucp_tag_message_h message) noexcept {
  UcxRequest request(Kind::Recv, worker);
  ucp_request_param_t param{};
  const ucs_status_ptr_t result =
      ucp_tag_msg_recv_nbx(worker, bytes ? data : &zero_byte_buffer, bytes, message, &param);
  if (result == nullptr) {
    request.status_ = UCS_OK;
    request.received_ = bytes;
  } else if (UCS_PTR_IS_ERR(result)) {
    request.status_ = UCS_PTR_STATUS(result);
  } else {
    request.pending_ = result;
    request.status_ = UCS_INPROGRESS;
  }
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
