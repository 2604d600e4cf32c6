// libFuzzer harness: resolve_environment() (lib/bootstrap/environment.cpp) with arbitrary launcher
// variables and config overrides.
//
// Input:
//   u8 config mask  which EnvironmentConfig fields are set: bit 0 rank, 1 world_size, 2 local_rank,
//                   3 local_world_size, 4 node_rank, 5 num_nodes, 6 store_port, 7 host_store;
//                   then, for each set bit in that order, its value (u32 as int32; u16 port; u8)
//   records         u8 variable (index into kVariables, modulo), u8 length, value bytes (up to the
//                   first NUL); a later record for the same variable replaces the earlier
// Every variable in kVariables is unset before each input.
//
// Invariants:
// - it returns an Environment or throws Error(InvalidArgument);
// - a returned one is consistent: 0 <= rank < world_size, 1 <= local_world_size <= world_size,
//   0 <= local_rank < local_world_size, 1 <= num_nodes <= world_size, 0 <= node_rank < num_nodes;
// - config fields win: a config rank and world size make the source Config, and a config
//   store_port or host_store is what is returned.

#include <cohort/environment.hpp>

#include "fuzz_check.hpp"

#include <cstdlib>
#include <string>

using namespace cohort;

namespace {

// Every variable environment.cpp reads (its launcher table and the store settings).
constexpr const char* kVariables[] = {
    "COHORT_RANK",
    "COHORT_WORLD_SIZE",
    "COHORT_LOCAL_RANK",
    "COHORT_LOCAL_WORLD_SIZE",
    "COHORT_NODE_RANK",
    "COHORT_NNODES",
    "COHORT_JOB_ID",
    "RANK",
    "WORLD_SIZE",
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
    "GROUP_RANK",
    "GROUP_WORLD_SIZE",
    "TORCHELASTIC_RUN_ID",
    "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_SIZE",
    "OMPI_COMM_WORLD_LOCAL_RANK",
    "OMPI_COMM_WORLD_LOCAL_SIZE",
    "OMPI_MCA_ess_base_jobid",
    "OMPI_MCA_orte_ess_jobid",
    "PMIX_NAMESPACE",
    "PMI_RANK",
    "PMI_SIZE",
    "MPI_LOCALRANKID",
    "MPI_LOCALNRANKS",
    "PMI_JOBID",
    "PMI_KVSNAME",
    "SLURM_PROCID",
    "SLURM_NTASKS",
    "SLURM_LOCALID",
    "SLURM_NODEID",
    "SLURM_NNODES",
    "SLURM_STEP_TASKS_PER_NODE",
    "SLURM_TASKS_PER_NODE",
    "SLURM_JOB_ID",
    "SLURM_JOBID",
    "SLURM_STEP_ID",
    "SLURM_STEPID",
    "COHORT_STORE_ADDR",
    "MASTER_ADDR",
    "COHORT_STORE_PORT",
    "MASTER_PORT",
    "TORCHELASTIC_USE_AGENT_STORE",
    "COHORT_TOKEN",
    "COHORT_HOST_STORE",
    "SLURM_STEP_NUM_TASKS",
    "SLURM_STEP_NUM_NODES",
};
constexpr std::size_t kVariableCount = sizeof kVariables / sizeof kVariables[0];

void require_consistent(const Environment& env, const EnvironmentConfig& config) {
  const std::string where =
      std::string("resolved from ") + launch_source_name(env.source) + ": rank " +
      std::to_string(env.rank) + "/" + std::to_string(env.world_size) + ", local " +
      std::to_string(env.local_rank) + "/" + std::to_string(env.local_world_size) + ", node " +
      std::to_string(env.node_rank) + "/" + std::to_string(env.num_nodes);
  FUZZ_REQUIRE(env.rank >= 0 && env.rank < env.world_size, where);
  FUZZ_REQUIRE(env.local_world_size >= 1 && env.local_world_size <= env.world_size, where);
  FUZZ_REQUIRE(env.local_rank >= 0 && env.local_rank < env.local_world_size, where);
  FUZZ_REQUIRE(env.num_nodes >= 1 && env.num_nodes <= env.world_size, where);
  FUZZ_REQUIRE(env.node_rank >= 0 && env.node_rank < env.num_nodes, where);
  if (config.rank && config.world_size) {
    FUZZ_REQUIRE(env.source == LaunchSource::Config, where + " despite a config rank and size");
    FUZZ_REQUIRE(env.rank == *config.rank && env.world_size == *config.world_size,
                 where + " differs from the config");
  }
  if (config.store_port)
    FUZZ_REQUIRE(env.store_port == *config.store_port, where + ": the config's port was not kept");
  if (config.host_store)
    FUZZ_REQUIRE(env.host_store == *config.host_store, where + ": config host_store not kept");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  for (const char* name : kVariables) ::unsetenv(name);
  fuzz::ByteReader in(data, size);

  EnvironmentConfig config;
  const std::uint8_t mask = in.u8();
  const auto integer = [&] { return static_cast<int>(static_cast<std::int32_t>(in.u32())); };
  if (mask & 1) config.rank = integer();
  if (mask & 2) config.world_size = integer();
  if (mask & 4) config.local_rank = integer();
  if (mask & 8) config.local_world_size = integer();
  if (mask & 16) config.node_rank = integer();
  if (mask & 32) config.num_nodes = integer();
  if (mask & 64) config.store_port = in.u16();
  if (mask & 128) config.host_store = (in.u8() & 1) != 0;

  while (!in.empty()) {
    const char* name = kVariables[in.u8() % kVariableCount];
    const std::size_t length = in.u8();
    ::setenv(name, fuzz::env_text(in.take(length)).c_str(), 1);
  }

  Environment env;
  try {
    env = resolve_environment(config);
  } catch (const Error& e) {
    fuzz::require_invalid_argument(e, "resolve_environment");
    return 0;
  }
  require_consistent(env, config);
  return 0;
}
