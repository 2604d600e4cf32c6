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
///
/// Source: the config when it sets both rank and world_size; otherwise the first family that
/// exports a rank or world size, in the order COHORT_*, torchrun (RANK, WORLD_SIZE, LOCAL_RANK,
/// LOCAL_WORLD_SIZE, GROUP_RANK, GROUP_WORLD_SIZE), Open MPI (OMPI_COMM_WORLD_RANK/SIZE/
/// LOCAL_RANK/LOCAL_SIZE), MPICH/PMI (PMI_RANK, PMI_SIZE, MPI_LOCALRANKID, MPI_LOCALNRANKS),
/// Slurm (SLURM_PROCID, SLURM_[STEP_NUM_]TASKS, SLURM_LOCALID, SLURM_NODEID,
/// SLURM_NNODES or SLURM_STEP_NUM_NODES, SLURM_[STEP_]TASKS_PER_NODE; the step's counts first) for
/// a task srun started (SLURM_STEP_ID set): a batch script or salloc shell, which has the task
/// variables but no step, is a world of one (with a warning when SLURM_NTASKS is above 1).
/// Rank-related fields come from that source only; a config field set alone overrides the same
/// field of the source. Placement the source leaves out is derived assuming ranks fill nodes in
/// blocks: without any node information the job is one node (local = world); local_world_size =
/// world / num_nodes; local_rank = rank % local_world_size; node_rank = rank / local_world_size.
/// Open MPI's OMPI_COMM_WORLD_NODE_RANK is not a node index and is not used, so under `mpirun
/// --map-by node` the derived node_rank is wrong; communicators never rely on it (they tell hosts
/// apart by each rank's host identity), only code reading Environment::node_rank would. Store:
/// store_addr from config, COHORT_STORE_ADDR, MASTER_ADDR; store_port from config,
/// COHORT_STORE_PORT, MASTER_PORT plus one under every launcher (MASTER_PORT is
/// torch.distributed's: its rank 0 or torchrun's agent binds a store there; 65535 is refused);
/// token from config, COHORT_TOKEN; job_id from config, COHORT_JOB_ID, then the source's
/// (TORCHELASTIC_RUN_ID, OMPI_MCA_ess_base_jobid, PMI_JOBID/PMI_KVSNAME, PMIX_NAMESPACE,
/// SLURM_JOB_ID.SLURM_STEP_ID). host_store from config, COHORT_HOST_STORE (0/1), else true for
/// torchrun, Open MPI, PMI and Slurm (no launcher hosts cohort's store there).
Environment resolve_environment(const EnvironmentConfig& config = {});

/// "config", "cohort", "torchrun", "openmpi", "pmi", "slurm", "standalone".
const char* launch_source_name(LaunchSource source);

/// The store every rank of the job shares. Connects to env.store_addr:store_port when known
/// (rank 0 hosts it there itself when env.host_store). Otherwise rank 0 hosts a TcpStoreServer
/// (kept alive by the returned store) and publishes host, port and a random token in
/// "<COHORT_RENDEZVOUS_DIR or temp dir>/cohort-<job_id>.addr" (written atomically, mode 0600,
/// removed when rank 0's store is destroyed); other ranks poll for that file until
/// default_store_timeout() and skip stale files from earlier jobs with the same id. Each rank
/// then holds the key "cohort/rendezvous/rank/<r>". Without a job id on one node, the parent's
/// pid names the file. Rank 0 binds loopback on one node, the wildcard address otherwise (see
/// lib/bootstrap/rendezvous.cpp). Other ranks' calls fail with RemoteError once rank 0 has
/// destroyed its store, so rank 0 must outlive their use of it. A world of one (standalone or
/// without an address) gets an in-process store.
std::shared_ptr<Store> connect_store(const Environment& env);

/// An in-process Store (for a world of one, or tests within one process).
std::shared_ptr<Store> make_local_store();

}  // namespace cohort
