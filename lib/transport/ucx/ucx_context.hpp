#pragma once

// The UCX context: one per process, shared by every world's hub (each owning its own worker).
// It is created on first use and destroyed when the last transport releases it, so a process
// that forks before creating any transport gives its children a clean slate.

#include <ucp/api/ucp.h>

#include <memory>
#include <string>

namespace cohort::transport::ucx {

class UcxContext {
 public:
  /// The live context, or a new one (features TAG | WAKEUP, workers usable from several threads
  /// one at a time). UCX reads its UCX_* variables now. Throws Error on UCX failure.
  static std::shared_ptr<UcxContext> shared();

  ~UcxContext();
  UcxContext(const UcxContext&) = delete;
  UcxContext& operator=(const UcxContext&) = delete;

  ucp_context_h get() const noexcept { return context_; }
  /// "ucx 1.13.1 tls=all", for logs.
  const std::string& description() const noexcept { return description_; }

 private:
  UcxContext(ucp_context_h context, std::string description);
  ucp_context_h context_;
  std::string description_;
};

}  // namespace cohort::transport::ucx
