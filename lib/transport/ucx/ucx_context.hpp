#pragma once

// The UCX context: one per process and kind (worlds whose hosts talk over TCP, and the others),
// shared by every such world's hub (each owning its own worker). It is created on first use and
// destroyed when the last transport releases it, so a process that forks before creating any
// transport gives its children a clean slate.

#include <ucp/api/ucp.h>

#include <memory>
#include <string>
#include <vector>

namespace cohort::transport::ucx {

/// Sets cohort's own defaults in a UCX configuration read from the environment, each unless
/// the user set that variable: the shared-memory transports' element size, MM_SEG_SIZE, unless
/// UCX_MM_SEG_SIZE, UCX_SYSV_SEG_SIZE, UCX_POSIX_SEG_SIZE or UCX_XPMEM_SEG_SIZE is set, and only
/// where UCX_TLS leaves those transports in use; and, `hosts_over_tcp`, eager sends at every
/// size (RNDV_THRESH=inf) unless UCX_RNDV_THRESH is set (see the .cpp for both). Returns the
/// names it set, in that order. UCX accepts any transport's setting here and checks it only when a
/// worker is created (a name no transport takes draws its "invalid configuration" warning then); a
/// name this UCX does not know at all is left out, with a debug line. Every rank of a world must
/// run the same element size: shared-memory peers write into each other's FIFOs.
std::vector<std::string> apply_cohort_defaults(ucp_config_t* config, bool hosts_over_tcp);

/// Whether `tls` (UCX_TLS's value; null or empty when unset) leaves one of UCX's RDMA transports
/// (InfiniBand/RoCE: rc, dc, ud and their variants such as rc_verbs or dc_mlx5, or the group
/// "ib") in use.
bool rdma_in_transport_list(const char* tls);

/// Whether UCX may reach other hosts by RDMA from here: UCX_TLS leaves an RDMA transport in, and
/// UCX's InfiniBand component lists a device (every verbs device it can see, so an iWARP or EFA
/// adapter, or one UCX_NET_DEVICES leaves out, counts too: cohort then leaves UCX alone, the safe
/// side). Without, UCX reaches other hosts over TCP.
bool ucx_has_rdma();

class UcxContext {
 public:
  /// The live context of this kind, or a new one (features TAG | WAKEUP | AM, workers usable from
  /// several threads one at a time). UCX reads its UCX_* variables now, then cohort's defaults
  /// fill in those left unset (apply_cohort_defaults, with `hosts_over_tcp`: true for a world
  /// whose ranks span hosts, where UCX has no RDMA device to use: !ucx_has_rdma()). Thread-safe.
  /// Throws Error on UCX failure.
  static std::shared_ptr<UcxContext> shared(bool hosts_over_tcp);

  ~UcxContext();
  UcxContext(const UcxContext&) = delete;
  UcxContext& operator=(const UcxContext&) = delete;

  ucp_context_h get() const noexcept { return context_; }
  /// "ucx 1.13.1 tls=all", with " rndv_thresh=inf" where cohort set it (or the user's value and
  /// variable where the user did), for logs and transport descriptions.
  const std::string& description() const noexcept { return description_; }

 private:
  UcxContext(ucp_context_h context, std::string description);
  ucp_context_h context_;
  std::string description_;
};

}  // namespace cohort::transport::ucx
