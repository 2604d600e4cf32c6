#include "transport/ucx/ucx_context.hpp"

#include "core/log.hpp"
#include "transport/ucx/ucx_status.hpp"

#include <cstdlib>
#include <mutex>

namespace cohort::transport::ucx {
namespace {

// Config read from the environment; released even when ucp_init fails.
struct ConfigHandle {
  ucp_config_t* config = nullptr;
  ~ConfigHandle() {
    if (config) ucp_config_release(config);
  }
};

std::string make_description() {
  unsigned major = 0, minor = 0, release = 0;
  ucp_get_version(&major, &minor, &release);
  const char* tls = std::getenv("UCX_TLS");
  return "ucx " + std::to_string(major) + "." + std::to_string(minor) + "." +
         std::to_string(release) + " tls=" + (tls && *tls ? tls : "all");
}

}  // namespace

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

  // No cohort-chosen overrides: on one host the fastest path measured (posix eager + cma
  // rendezvous, 10-12 GB/s for 1-4 MiB) is what UCX picks by itself for endpoints without
  // peer-failure handling, and those are the ones same-host peers get (see ucx_transport.cpp).
  // Users tune UCX through its own UCX_* variables, which ucp_config_read picks up here.
  ConfigHandle config;
  if (ucs_status_t status = ucp_config_read(nullptr, nullptr, &config.config); status != UCS_OK)
    throw ucx_error(status, "reading the UCX configuration (UCX_* variables)");

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
