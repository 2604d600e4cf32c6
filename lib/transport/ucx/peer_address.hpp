#pragma once

// What a rank publishes in the store so peers can reach it: its UCX worker address plus the
// identity of its host and its pid, so same-host peers can be told apart from remote ones and
// watched for death without UCX's peer-failure handling (which would rule out shared memory).

#include "transport/cpu_set.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace cohort::transport::ucx {

struct PeerAddress {
  std::uint32_t pid = 0;
  /// local_host_identity() of the publishing process (transport/host_identity.hpp).
  std::string host_identity;
  std::vector<std::uint8_t> worker_address;
  /// The descriptor of its fastbox inbox (transport/fastbox.hpp) in its process; -1: none.
  std::int32_t fastbox_fd = -1;
  /// A random value at `probe_at` in its memory: a same-host peer that reads it there through
  /// `pid` may copy large messages straight out of its memory (transport/process_memory.hpp).
  std::uint64_t probe_at = 0;
  std::uint64_t probe = 0;
  /// The CPUs it may run on (affinity_cpus(); empty: unknown), for its host's wait policy.
  CpuSet cpus;
};

std::vector<std::uint8_t> encode_peer_address(const PeerAddress& address);
/// Throws Error(Internal) naming `rank` when the bytes are not an encoded PeerAddress.
PeerAddress decode_peer_address(const std::vector<std::uint8_t>& bytes, int rank);

}  // namespace cohort::transport::ucx
