#pragma once

// The environment variables a launcher gives each rank: cohort's own (COHORT_*) and torchrun's
// (RANK, WORLD_SIZE, ...), so code resolving either finds the same placement and store.
// cohort-run and cohort::launch() both build them here.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace cohort::launcher {

/// Where one rank sits and how it reaches the job's store.
struct RankPlacement {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  int node_rank = 0;
  int num_nodes = 1;
  std::string store_addr;
  std::uint16_t store_port = 0;
  std::string token;
  /// MASTER_PORT: a port of its own for torch.distributed's store, whose rank 0 binds it on
  /// MASTER_ADDR's node (never cohort's store port: it would find that taken). 0: neither
  /// MASTER_ADDR nor MASTER_PORT is exported.
  std::uint16_t master_port = 0;
};

/// The MASTER_PORT every launch of a job derives from its store's port, so that every node
/// exports the same: the next port, or the one before for the last port (65535), which has no
/// next. Never the store's own port.
constexpr std::uint16_t torch_port_beside(std::uint16_t store_port) noexcept {
  return store_port < 65535 ? static_cast<std::uint16_t>(store_port + 1)
                            : static_cast<std::uint16_t>(store_port - 1);
}

using EnvironmentVariables = std::vector<std::pair<std::string, std::string>>;

/// COHORT_RANK, COHORT_WORLD_SIZE, COHORT_LOCAL_RANK, COHORT_LOCAL_WORLD_SIZE,
/// COHORT_NODE_RANK, COHORT_NNODES, COHORT_STORE_ADDR, COHORT_STORE_PORT, COHORT_TOKEN, and
/// torchrun's RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK, and MASTER_ADDR (the
/// store's address: node 0) with MASTER_PORT (placement.master_port) when that is set.
EnvironmentVariables rank_variables(const RankPlacement& placement);

/// `base` ("K=V" strings, e.g. environ) with `overrides` replacing or adding entries; the
/// result is ready for execve.
std::vector<std::string> merge_environment(const std::vector<std::string>& base,
                                           const EnvironmentVariables& overrides);

/// The current process environment as "K=V" strings.
std::vector<std::string> current_environment();

/// 32 hex digits from /dev/urandom, for COHORT_TOKEN. Throws Error(SystemError) when the
/// random device cannot be read.
std::string random_token();

}  // namespace cohort::launcher
