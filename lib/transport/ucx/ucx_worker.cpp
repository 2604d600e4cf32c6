#include "transport/ucx/ucx_worker.hpp"

#include "transport/ucx/ucx_status.hpp"

#include <utility>

namespace cohort::transport::ucx {
namespace {

// The address buffer UCX allocates for us.
struct AddressHandle {
  ucp_worker_h worker;
  ucp_address_t* address = nullptr;
  std::size_t length = 0;
  ~AddressHandle() {
    if (address) ucp_worker_release_address(worker, address);
  }
};

}  // namespace

UcxWorker::UcxWorker(std::shared_ptr<UcxContext> context) : context_(std::move(context)) {
  ucp_worker_params_t params{};
  params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  params.thread_mode = UCS_THREAD_MODE_SERIALIZED;
  if (ucs_status_t status = ucp_worker_create(context_->get(), &params, &worker_); status != UCS_OK)
    throw ucx_error(status, "creating a UCX worker");
  if (ucs_status_t status = ucp_worker_get_efd(worker_, &event_fd_); status != UCS_OK) {
    ucp_worker_destroy(worker_);
    throw ucx_error(status, "getting the UCX worker's event fd");
  }
}

UcxWorker::~UcxWorker() {
  if (worker_) ucp_worker_destroy(worker_);
}

UcxWorker::UcxWorker(UcxWorker&& other) noexcept
    : context_(std::move(other.context_)),
      worker_(std::exchange(other.worker_, nullptr)),
      event_fd_(std::exchange(other.event_fd_, -1)) {}

std::vector<std::uint8_t> UcxWorker::address() const {
  AddressHandle handle{worker_};
  if (ucs_status_t status = ucp_worker_get_address(worker_, &handle.address, &handle.length);
      status != UCS_OK)
    throw ucx_error(status, "getting the UCX worker address");
  const auto* bytes = reinterpret_cast<const std::uint8_t*>(handle.address);
  return std::vector<std::uint8_t>(bytes, bytes + handle.length);
}

bool UcxWorker::progress() noexcept {
  bool any = false;
  while (ucp_worker_progress(worker_) != 0) any = true;
  return any;
}

bool UcxWorker::arm() {
  const ucs_status_t status = ucp_worker_arm(worker_);
  if (status == UCS_ERR_BUSY) return false;
  if (status != UCS_OK) throw ucx_error(status, "arming the UCX worker's event fd");
  return true;
}

}  // namespace cohort::transport::ucx
