#include "transport/ucx/ucx_context.hpp"

#include "core/log.hpp"
#include "transport/ucx/ucx_status.hpp"

#include <uct/api/uct.h>

#include <algorithm>
#include <cstdlib>
#include <initializer_list>
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

// Between hosts over TCP, UCX sends anything above 8 KiB by rendezvous, a handshake per message
// in which the receiver answers before the data moves. While both directions stream (an
// allreduce, a sendrecv) that costs a fifth to a half of the link: over a link shaped to 4 Gbit/s
// each way (bench/cross_host/run.sh -r), a 2-rank allreduce of 1-256 MiB moved 0.69-0.81 of
// one-way tag_bw and a sendrecv 0.49-0.64 in each direction, where plain TCP moved 0.45-0.47 GB/s
// each way at once (0.47-0.48 one way) and a one-way broadcast 0.95-1.09 of tag_bw. Sent eagerly
// (UCX_RNDV_THRESH=inf), the same allreduce moved 0.93-1.01 and the sendrecv 0.85-1.12
// (bench/PERFORMANCE-LOG.md, "Both ways over TCP", which lists the UCX settings that did not help).
// UCX 1.13's newer protocols (UCX_PROTO_ENABLE, experimental there, the default from UCX 1.16)
// chose eager sends over TCP by themselves and did as well, but a worker destroyed with a
// shared-memory rendezvous still pending crashed in their leak report, so cohort keeps UCX's
// protocols and sets the threshold. It is one setting for every transport: on one host it would
// take UCX's single-copy rendezvous away from large shared-memory messages (an alltoall of 4-16 MiB
// between two ranks over UCX took 1.3-2.2x as long), and with RDMA it would take away zero-copy
// transfers. So a world asks for it only when its ranks span hosts and UCX has no RDMA device here
// it may use (ucx_has_rdma: then TCP is its only way between hosts). The cost: a message whose
// receive is not posted yet is buffered whole by the receiver's UCX until it is. A threshold is
// each sender's own choice, so ranks that decide differently still understand each other.
constexpr const char* kThresholdName = "RNDV_THRESH";
constexpr const char* kThresholdValue = "inf";
constexpr const char* kThresholdVariable = "UCX_RNDV_THRESH";

/// UCX_TLS's value read as UCX reads it: an optional leading '^' (every transport but those
/// named), then names separated by commas.
struct TransportList {
  bool excluding = false;
  std::vector<std::string_view> names;
  bool names_any(std::initializer_list<std::string_view> wanted) const {
    return std::find_first_of(names.begin(), names.end(), wanted.begin(), wanted.end()) !=
           names.end();
  }
};

TransportList read_transport_list(std::string_view list) {
  TransportList read;
  read.excluding = !list.empty() && list.front() == '^';
  if (read.excluding) list.remove_prefix(1);
  while (!list.empty()) {
    const std::size_t comma = list.find(',');
    read.names.push_back(list.substr(0, comma));
    list.remove_prefix(comma == std::string_view::npos ? list.size() : comma + 1);
  }
  return read;
}

/// Whether UCX_TLS (`tls`; null when unset) leaves a shared-memory transport of the "MM" family
/// (posix, sysv) in use. UCX takes a setting through ucp_config_modify under any name and
/// applies it to each transport it opens; one that no transport took makes the worker warn
/// ("invalid configuration"), so the default is set only where it applies.
bool mm_transports_in(const char* tls) {
  if (tls == nullptr || *tls == '\0') return true;
  const TransportList list = read_transport_list(tls);
  const bool all = list.names_any({"all"}), group = list.names_any({"sm", "shm", "mm"}),
             posix = list.names_any({"posix"}), sysv = list.names_any({"sysv"});
  if (list.excluding) return !(all || group || (posix && sysv));
  return all || group || posix || sysv;
}

/// "ucx 1.13.1 tls=all", then " rndv_thresh=..." where cohort or the user set that.
std::string make_description(const std::vector<std::string>& applied) {
  unsigned major = 0, minor = 0, release = 0;
  ucp_get_version(&major, &minor, &release);
  const char* tls = std::getenv("UCX_TLS");
  std::string description = "ucx " + std::to_string(major) + "." + std::to_string(minor) + "." +
                            std::to_string(release) + " tls=" + (tls && *tls ? tls : "all");
  if (std::find(applied.begin(), applied.end(), kThresholdName) != applied.end()) {
    description += std::string(" rndv_thresh=") + kThresholdValue;
  } else if (const char* user = std::getenv(kThresholdVariable)) {
    description += std::string(" rndv_thresh=") + user + " (" + kThresholdVariable + ")";
  }
  return description;
}

}  // namespace

std::vector<std::string> apply_cohort_defaults(ucp_config_t* config, bool hosts_over_tcp) {
  const auto set_by_user = [](const char* variable) { return std::getenv(variable) != nullptr; };
  std::vector<std::string> applied;
  const auto apply = [&](const char* name, const char* value) {
    if (const ucs_status_t status = ucp_config_modify(config, name, value); status != UCS_OK) {
      COHORT_LOG_DEBUG("UCX_{}={} not applied: {}", name, value, ucs_status_string(status));
      return;
    }
    applied.emplace_back(name);
  };
  if (mm_transports_in(std::getenv("UCX_TLS")) &&
      std::none_of(std::begin(kElementSizeVariables), std::end(kElementSizeVariables), set_by_user))
    apply(kElementSizeName, kElementSize);
  if (hosts_over_tcp && !set_by_user(kThresholdVariable)) apply(kThresholdName, kThresholdValue);
  return applied;
}

UcxContext::UcxContext(ucp_context_h context, std::string description)
    : context_(context), description_(std::move(description)) {}

UcxContext::~UcxContext() {
  ucp_cleanup(context_);
}

bool rdma_in_transport_list(const char* tls) {
  if (tls == nullptr || *tls == '\0') return true;
  const TransportList list = read_transport_list(tls);
  const bool all = list.names_any({"all"}), group = list.names_any({"ib"});
  // An exclusion list leaves some RDMA transport in unless it names all of them (or "all").
  if (list.excluding) return !(all || group);
  // UCX's names for its InfiniBand/RoCE transports and their groups.
  return all || list.names_any({"ib", "rc", "rc_v", "rc_x", "rc_verbs", "rc_mlx5", "dc", "dc_x",
                                "dc_mlx5", "ud", "ud_v", "ud_x", "ud_verbs", "ud_mlx5"});
}

bool ucx_has_rdma() {
  if (!rdma_in_transport_list(std::getenv("UCX_TLS"))) return false;
  // UCX's own view: its "ib" component lists a memory domain per RDMA device it can open
  // (InfiniBand, RoCE); none without such hardware, or without UCX's verbs support.
  uct_component_h* components = nullptr;
  unsigned count = 0;
  if (uct_query_components(&components, &count) != UCS_OK) return false;
  bool found = false;
  for (unsigned i = 0; i < count && !found; ++i) {
    uct_component_attr_t attr{};
    attr.field_mask = UCT_COMPONENT_ATTR_FIELD_NAME;
    if (uct_component_query(components[i], &attr) != UCS_OK || std::string_view(attr.name) != "ib")
      continue;
    attr.field_mask = UCT_COMPONENT_ATTR_FIELD_MD_RESOURCE_COUNT;
    found = uct_component_query(components[i], &attr) == UCS_OK && attr.md_resource_count > 0;
  }
  uct_release_component_list(components);
  return found;
}

std::shared_ptr<UcxContext> UcxContext::shared(bool hosts_over_tcp) {
  // Weak references, not owning globals: a context lives exactly as long as some transport uses
  // it, and the next transport after that builds a fresh one. One per kind, as the two kinds are
  // configured differently (a process may run a one-host world and a world across hosts).
  static std::mutex mutex;
  static std::weak_ptr<UcxContext> current[2];
  std::lock_guard lock(mutex);
  std::weak_ptr<UcxContext>& slot = current[hosts_over_tcp ? 1 : 0];
  if (auto live = slot.lock()) return live;

  // Transports stay UCX's choice: on one host the fastest path measured (posix eager + cma
  // rendezvous, 10-12 GB/s for 1-4 MiB) is what UCX picks by itself for endpoints without
  // peer-failure handling, and those are the ones same-host peers get (see ucx_transport.cpp).
  // Users tune UCX through its own UCX_* variables, which ucp_config_read picks up here and
  // which win over cohort's few defaults. (A setting in UCX's configuration file, ucx.conf, is
  // not seen by that check: cohort's default overrides it; set the variable instead.)
  ConfigHandle config;
  if (ucs_status_t status = ucp_config_read(nullptr, nullptr, &config.config); status != UCS_OK)
    throw ucx_error(status, "reading the UCX configuration (UCX_* variables)");
  const std::vector<std::string> applied = apply_cohort_defaults(config.config, hosts_over_tcp);

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
  auto created = std::shared_ptr<UcxContext>(new UcxContext(context, make_description(applied)));
  COHORT_LOG_DEBUG("created UCX context: {}", created->description());
  slot = created;
  return created;
}

}  // namespace cohort::transport::ucx
