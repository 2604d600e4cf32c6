#pragma once

// Building the transport of one communicator.

#include "transport/transport.hpp"

#include <cohort/store.hpp>

#include <chrono>
#include <memory>
#include <string>

namespace cohort::transport {

struct TransportOptions {
  /// Ranks on this host (decides how long waits spin before sleeping; see wait_policy.hpp).
  int local_world_size = 1;
  /// How long connecting may take in all (every stage: the host-span verdict, each peer's
  /// address in the store, the handshakes).
  std::chrono::milliseconds connect_timeout{60000};
};

/// The transport of a world (tag id 0; communicators split from it derive() theirs from it).
/// Collective over `size` ranks: publishes this rank's address under "<key_prefix>/addr/<rank>"
/// in `store`, reads every peer's, connects. size == 1 needs no UCX (an in-process self
/// transport). Throws Error(InvalidArgument) naming rank/size when 0 <= rank < size <= kMaxRanks
/// does not hold, Error(Unsupported) when size > 1 and cohort was built without UCX,
/// Error(Timeout) naming the key when a peer's address does not arrive in time, or naming the
/// peers when the handshakes do not finish within `connect_timeout` of the call.
std::unique_ptr<Transport> create_transport(Store& store, const std::string& key_prefix, int rank,
                                            int size, const TransportOptions& options = {});

}  // namespace cohort::transport
