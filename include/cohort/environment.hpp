#pragma once

/// Where this process sits in the job: rank, world size, node, and how to reach the store.
/// Resolved from (in order) an explicit EnvironmentConfig, COHORT_* variables, torchrun's,
/// Open MPI's, MPICH/PMI's, Slurm's; with none of them, a world of one.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace cohort {

class Store;
class TcpStoreServer;

/// Which launcher's variables supplied the rank and world size.
enum class LaunchSource { Config, Cohort, Torchrun, OpenMpi, Pmi, Slurm, Standalone };

struct Environment {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  int node_rank = 0;
  int num_nodes = 1;
  std::string store_addr;  ///< empty when unknown (see connect_store)
  std::uint16_t store_port = 0;
  std::string token;
  /// A job id from the launcher, used to name the rendezvous file when no store address is set.
  std::string job_id;
  /// True when nobody hosts the store at store_addr:store_port yet, so rank 0 must bind it
  /// itself (mpirun/srun/torchrun with COHORT_STORE_ADDR or MASTER_ADDR). False when a launcher
  /// (cohort-run, launch()) or the caller already hosts it there. Ignored without an address.
  bool host_store = false;
  LaunchSource source = LaunchSource::Standalone;
};

/// Explicit overrides; every field set here wins over any variable.
struct EnvironmentConfig {
  std::optional<int> rank, world_size, local_rank, local_world_size, node_rank, num_nodes;
  std::optional<std::string> store_addr;
  std::optional<std::uint16_t> store_port;
  std::optional<std::string> token;
  std::optional<std::string> job_id;
  std::optional<bool> host_store;
};

/// Reads the process environment. Throws Error(InvalidArgument) naming the variable when values
/// are missing, malformed or inconsistent (rank >= world size, world size without rank, ...).
Environment resolve_environment(const EnvironmentConfig& config = {});

/// "config", "cohort", "torchrun", "openmpi", "pmi", "slurm", "standalone".
const char* launch_source_name(LaunchSource source);

/// The store every rank of the job shares. Connects to env.store_addr:store_port when known.
/// Otherwise rank 0 hosts a TcpStoreServer (kept alive by the returned store) and publishes its
/// address in "<COHORT_RENDEZVOUS_DIR or temp dir>/cohort-<job_id>.addr"; other ranks wait for
/// that file. A world of one gets an in-process store.
std::shared_ptr<Store> connect_store(const Environment& env);

/// An in-process Store (for a world of one, or tests within one process).
std::shared_ptr<Store> make_local_store();

}  // namespace cohort
