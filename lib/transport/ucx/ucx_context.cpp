#include "transport/ucx/ucx_context.hpp"

#include "core/log.hpp"
#include "transport/ucx/ucx_status.hpp"

#include <algorithm>
#include <cstdlib>
#include <iterator>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace cohort::transport::ucx {
namespace {

// Config read from the environment; released even when ucp_init fails.
struct ConfigHandle {
  ucp_config_t* config = nullptr;
  ~ConfigHandle() {
    if (config) ucp_config_release(config);
  }
};

// UCX's shared-memory transports (sysv, posix: the "MM" ones) carry an eager message in one
// element of the receiver's FIFO, SEG_SIZE bytes (8256 by default), and send anything larger by
// rendezvous (a handshake, then a copy out of the sender's pages): a 2-rank sendrecv of 16 or
// 32 KiB took 10-11 us that way, against 3.8-5.6 us in elements of 33K, which hold messages of
// up to 32 KiB (bench/PERFORMANCE-LOG.md, "UCX's shared-memory element size"). Not larger: with
// elements of 66K, UCX 1.13 delivered a 64 KiB message as an empty one. Costs 64 elements per
// process and transport (about 2 MiB each).
constexpr const char* kElementSizeName = "MM_SEG_SIZE";
constexpr const char* kElementSize = "33K";
/// The variables through which a user sets that size; any of them set keeps the user's.
constexpr const char* kElementSizeVariables[] = {"UCX_MM_SEG_SIZE", "UCX_SYSV_SEG_SIZE",
                                                 "UCX_POSIX_SEG_SIZE", "UCX_XPMEM_SEG_SIZE"};

/// Whether UCX_TLS (`tls`; null when unset) leaves a shared-memory transport of the "MM" family
/// (posix, sysv) in use. UCX takes a setting through ucp_config_modify under any name and
/// applies it to each transport it opens; one that no transport took makes the worker warn
/// ("invalid configuration"), so the default is set only where it applies.
bool mm_transports_in(const char* tls) {
  if (tls == nullptr || *tls == '\0') return true;
  std::string_view list(tls);
  const bool excluding = list.front() == '^';
  if (excluding) list.remove_prefix(1);
  bool all = false, group = false, posix = false, sysv = false;
  while (!list.empty()) {
    const std::size_t comma = list.find(',');
    const std::string_view name = list.substr(0, comma);
    all = all || name == "all";
    group = group || name == "sm" || name == "shm" || name == "mm";
    posix = posix || name == "posix";
    sysv = sysv || name == "sysv";
    list.remove_prefix(comma == std::string_view::npos ? list.size() : comma + 1);
  }
  if (excluding) return !(all || group || (posix && sysv));
  return all || group || posix || sysv;
}

std::string make_description() {
  unsigned major = 0, minor = 0, release = 0;
  ucp_get_version(&major, &minor, &release);
  const char* tls = std::getenv("UCX_TLS");
  return "ucx " + std::to_string(major) + "." + std::to_string(minor) + "." +
         std::to_string(release) + " tls=" + (tls && *tls ? tls : "all");
}

}  // namespace

std::vector<std::string> apply_cohort_defaults(ucp_config_t* config) {
  if (!mm_transports_in(std::getenv("UCX_TLS"))) return {};
  const auto set_by_user = [](const char* variable) { return std::getenv(variable) != nullptr; };
  if (std::any_of(std::begin(kElementSizeVariables), std::end(kElementSizeVariables), set_by_user))
    return {};
  if (const ucs_status_t status = ucp_config_modify(config, kElementSizeName, kElementSize);
      status != UCS_OK) {
    COHORT_LOG_DEBUG("UCX_{}={} not applied: {}", kElementSizeName, kElementSize,
                     ucs_status_string(status));
    return {};
  }
  return {kElementSizeName};
}

UcxContext::UcxContext(ucp_context_h context, std::string description)
    : context_(context), description_(std::move(description)) {}

UcxContext::~UcxContext() {
  ucp_cleanup(context_);
}

std::shared_ptr<UcxContext> UcxContext::shared() {
  // A weak reference, not an owning global: the context lives exactly as long as some transport
  // uses it, and the next transport after that builds a fresh one.
  static std::mutex mutex;
  static std::weak_ptr<UcxContext> current;
  std::lock_guard lock(mutex);
  if (auto live = current.lock()) return live;

  // Transports stay UCX's choice: on one host the fastest path measured (posix eager + cma
  // rendezvous, 10-12 GB/s for 1-4 MiB) is what UCX picks by itself for endpoints without
  // peer-failure handling, and those are the ones same-host peers get (see ucx_transport.cpp).
  // Users tune UCX through its own UCX_* variables, which ucp_config_read picks up here and
  // which win over cohort's few defaults. (A setting in UCX's configuration file, ucx.conf, is
  // not seen by that check: cohort's default overrides it; set the variable instead.)
  ConfigHandle config;
  if (ucs_status_t status = ucp_config_read(nullptr, nullptr, &config.config); status != UCS_OK)
    throw ucx_error(status, "reading the UCX configuration (UCX_* variables)");
  apply_cohort_defaults(config.config);

  ucp_params_t params{};
  params.field_mask =
      UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED | UCP_PARAM_FIELD_NAME;
  // Active messages only ring fastbox doorbells (ucx_hub_fastbox.cpp); data goes by tag.
  params.features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP | UCP_FEATURE_AM;
  // Communicators may hand their worker between the caller's thread and a progress thread.
  params.mt_workers_shared = 1;
  params.name = "cohort";
  ucp_context_h context = nullptr;
  if (ucs_status_t status = ucp_init(&params, config.config, &context); status != UCS_OK)
    throw ucx_error(status, "initialising UCX (ucp_init)");
  auto created = std::shared_ptr<UcxContext>(new UcxContext(context, make_description()));
  COHORT_LOG_DEBUG("created UCX context: {}", created->description());
  current = created;
  return created;
}

}  // namespace cohort::transport::ucx
