#pragma once

// A UCX worker: the progress engine and tag-matching queue of one transport. It keeps the shared
// context alive, so contexts are torn down after every worker built on them.

#include "transport/ucx/ucx_context.hpp"

#include <ucp/api/ucp.h>

#include <cstdint>
#include <memory>
#include <vector>

namespace cohort::transport::ucx {

class UcxWorker {
 public:
  /// A worker in SERIALIZED thread mode (one thread at a time, possibly different threads).
  /// Throws Error on UCX failure.
  explicit UcxWorker(std::shared_ptr<UcxContext> context);
  ~UcxWorker();
  UcxWorker(UcxWorker&& other) noexcept;
  UcxWorker& operator=(UcxWorker&&) = delete;
  UcxWorker(const UcxWorker&) = delete;
  UcxWorker& operator=(const UcxWorker&) = delete;

  ucp_worker_h get() const noexcept { return worker_; }
  const UcxContext& context() const noexcept { return *context_; }
  /// The address peers connect to (opaque bytes).
  std::vector<std::uint8_t> address() const;
  /// The fd that becomes readable when the worker has events (after arm()).
  int event_fd() const noexcept { return event_fd_; }

  /// Progresses until nothing more happens; true if anything did.
  bool progress() noexcept;
  /// Arms the event fd. False when events are already pending: progress instead of sleeping.
  bool arm();

 private:
  std::shared_ptr<UcxContext> context_;
  ucp_worker_h worker_ = nullptr;
  int event_fd_ = -1;  // owned by the worker
};

}  // namespace cohort::transport::ucx
