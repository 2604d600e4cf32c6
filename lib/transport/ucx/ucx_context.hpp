#pragma once

// The UCX context: one per process, shared by every world's hub (each owning its own worker).
// It is created on first use and destroyed when the last transport releases it, so a process
// that forks before creating any transport gives its children a clean slate.

#include <ucp/api/ucp.h>

#include <memory>
#include <string>
#include <vector>

namespace cohort::transport::ucx {

/// Sets cohort's own defaults in a UCX configuration read from the environment, each unless
/// the user set that variable: the shared-memory transports' element size, MM_SEG_SIZE, unless
/// UCX_MM_SEG_SIZE, UCX_SYSV_SEG_SIZE, UCX_POSIX_SEG_SIZE or UCX_XPMEM_SEG_SIZE is set, and only
/// where UCX_TLS leaves those transports in use (see the .cpp). Returns the names it set. UCX
/// accepts any name here and checks it only when a worker is created (a name no transport takes
/// draws its "invalid configuration" warning then). Every rank must run the same: shared-memory
/// peers write into each other's FIFOs, whose element size this sets.
std::vector<std::string> apply_cohort_defaults(ucp_config_t* config);

class UcxContext {
 public:
  /// The live context, or a new one (features TAG | WAKEUP, workers usable from several threads
  /// one at a time). UCX reads its UCX_* variables now, then cohort's defaults fill in those
  /// left unset (apply_cohort_defaults). Throws Error on UCX failure.
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
