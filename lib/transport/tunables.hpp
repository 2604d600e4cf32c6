#pragma once

// Every tunable of the transport layer, declared once with its environment variable. Values are
// read when a transport is created (not cached process-wide), so tests may set them per child.

#include <chrono>
#include <optional>

namespace cohort::transport {

/// COHORT_SPIN_US: microseconds wait() busy-polls the network before blocking on the worker's
/// event fd. Unset: chosen from how many ranks share this host's cores (see wait_policy.hpp).
inline constexpr const char* kSpinUsEnv = "COHORT_SPIN_US";

/// COHORT_UCX_ERR_HANDLING: "auto" (default) or "peer". UCX 1.13 cannot use shared memory
/// (posix, sysv, cma) on endpoints with peer-failure handling, so "auto" connects same-host peers
/// without it (and watches their process instead) and remote peers with it; "peer" uses UCX's
/// peer-failure handling everywhere, which routes same-host traffic over TCP loopback (~3x slower).
inline constexpr const char* kUcxErrHandlingEnv = "COHORT_UCX_ERR_HANDLING";

/// COHORT_SHARED_MEMORY: "auto" (default) or "off". "auto" maps a shared segment among the ranks
/// of a communicator when all of them are on one host, and the shared-memory algorithms use it;
/// "off" on any rank leaves every collective to the message transport.
inline constexpr const char* kSharedMemoryEnv = "COHORT_SHARED_MEMORY";

enum class PeerErrorHandling { Auto, Peer };

struct TransportTunables {
  std::optional<std::chrono::microseconds> spin;
  PeerErrorHandling err_handling = PeerErrorHandling::Auto;
  bool shared_memory = true;
};

/// Reads the variables above. Throws Error(InvalidArgument) naming the variable and its value
/// when one is malformed.
TransportTunables read_transport_tunables();

}  // namespace cohort::transport
