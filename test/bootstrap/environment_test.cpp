// resolve_environment() against each launcher's variables, set explicitly per case. Every case
// starts from an environment with all launcher variables removed and restores them afterwards.

#include <cohort/environment.hpp>
#include <cohort/error.hpp>

#include <catch2/catch.hpp>

#include <cstdlib>
#include <map>
#include <optional>
#include <string>

using namespace cohort;

namespace {

const char* const kLauncherVariables[] = {
    "COHORT_RANK",
    "COHORT_WORLD_SIZE",
    "COHORT_LOCAL_RANK",
    "COHORT_LOCAL_WORLD_SIZE",
    "COHORT_NODE_RANK",
    "COHORT_NNODES",
    "COHORT_STORE_ADDR",
    "COHORT_STORE_PORT",
    "COHORT_TOKEN",
    "COHORT_JOB_ID",
    "COHORT_HOST_STORE",
    "RANK",
    "WORLD_SIZE",
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
    "GROUP_RANK",
    "GROUP_WORLD_SIZE",
    "MASTER_ADDR",
    "MASTER_PORT",
    "TORCHELASTIC_RUN_ID",
    "TORCHELASTIC_USE_AGENT_STORE",
    "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_SIZE",
    "OMPI_COMM_WORLD_LOCAL_RANK",
    "OMPI_COMM_WORLD_LOCAL_SIZE",
    "OMPI_COMM_WORLD_NODE_RANK",
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
    "SLURM_JOB_ID",
    "SLURM_JOBID",
    "SLURM_STEP_ID",
    "SLURM_STEPID",
    "SLURM_TASKS_PER_NODE",
    "SLURM_STEP_TASKS_PER_NODE",
    "SLURM_STEP_NUM_TASKS",
    "SLURM_STEP_NUM_NODES",
};

// Clears every variable the resolver reads, restoring the originals when destroyed.
class CleanEnvironment {
 public:
  CleanEnvironment() {
    for (const char* name : kLauncherVariables) {
      if (const char* value = std::getenv(name)) saved_[name] = value;
      ::unsetenv(name);
    }
  }
  ~CleanEnvironment() {
    for (const char* name : kLauncherVariables) ::unsetenv(name);
    for (const auto& [name, value] : saved_) ::setenv(name.c_str(), value.c_str(), 1);
  }
  void set(const char* name, const char* value) { ::setenv(name, value, 1); }

 private:
  std::map<std::string, std::string> saved_;
};

// Runs resolve_environment expecting InvalidArgument whose message names `variable`.
void expect_invalid(const std::string& variable, const EnvironmentConfig& config = {}) {
  try {
    const Environment env = resolve_environment(config);
    FAIL("resolved rank " << env.rank << " of " << env.world_size << "; expected an error naming "
                          << variable);
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::InvalidArgument);
    CHECK_THAT(e.message(), Catch::Contains(variable));
  }
}

}  // namespace

TEST_CASE("no launcher: a world of one", "[environment][unit]") {
  CleanEnvironment clean;
  const Environment env = resolve_environment();
  CHECK(env.source == LaunchSource::Standalone);
  CHECK(env.rank == 0);
  CHECK(env.world_size == 1);
  CHECK(env.local_rank == 0);
  CHECK(env.local_world_size == 1);
  CHECK(env.node_rank == 0);
  CHECK(env.num_nodes == 1);
  CHECK(env.store_addr.empty());
  CHECK(env.store_port == 0);
  CHECK_FALSE(env.host_store);
  CHECK(std::string(launch_source_name(env.source)) == "standalone");
}

TEST_CASE("COHORT_* variables", "[environment][unit]") {
  CleanEnvironment clean;
  clean.set("COHORT_RANK", "5");
  clean.set("COHORT_WORLD_SIZE", "8");
  clean.set("COHORT_LOCAL_RANK", "1");
  clean.set("COHORT_LOCAL_WORLD_SIZE", "4");
  clean.set("COHORT_NODE_RANK", "1");
  clean.set("COHORT_NNODES", "2");
  clean.set("COHORT_STORE_ADDR", "10.1.2.3");
  clean.set("COHORT_STORE_PORT", "29400");
  clean.set("COHORT_TOKEN", "secret");
  clean.set("COHORT_JOB_ID", "job-42");
  const Environment env = resolve_environment();
  CHECK(env.source == LaunchSource::Cohort);
  CHECK(env.rank == 5);
  CHECK(env.world_size == 8);
  CHECK(env.local_rank == 1);
  CHECK(env.local_world_size == 4);
  CHECK(env.node_rank == 1);
  CHECK(env.num_nodes == 2);
  CHECK(env.store_addr == "10.1.2.3");
  CHECK(env.store_port == 29400);
  CHECK(env.token == "secret");
  CHECK(env.job_id == "job-42");
  CHECK_FALSE(env.host_store);  // cohort-run hosts the store itself
}

TEST_CASE("torchrun variables", "[environment][unit]") {
  CleanEnvironment clean;
  clean.set("RANK", "3");
  clean.set("WORLD_SIZE", "6");
  clean.set("LOCAL_RANK", "0");
  clean.set("LOCAL_WORLD_SIZE", "3");
  clean.set("GROUP_RANK", "1");
  clean.set("GROUP_WORLD_SIZE", "2");
  clean.set("MASTER_ADDR", "node0");
  clean.set("MASTER_PORT", "29500");
  clean.set("TORCHELASTIC_RUN_ID", "run-7");
  SECTION("fields map one to one") {
    const Environment env = resolve_environment();
    CHECK(env.source == LaunchSource::Torchrun);
    CHECK(env.rank == 3);
    CHECK(env.world_size == 6);
    CHECK(env.local_rank == 0);
    CHECK(env.local_world_size == 3);
    CHECK(env.node_rank == 1);
    CHECK(env.num_nodes == 2);
    CHECK(env.store_addr == "node0");
    CHECK(env.store_port == 29501);  // MASTER_PORT is torch's: its rank 0 binds a store there
    CHECK(env.job_id == "run-7");
    CHECK(env.host_store);  // nobody hosts cohort's store under torchrun: rank 0 does
  }
  SECTION("an agent store on MASTER_PORT: cohort's store is on the next port as well") {
    clean.set("TORCHELASTIC_USE_AGENT_STORE", "True");
    CHECK(resolve_environment().store_port == 29501);
  }
  SECTION("COHORT_STORE_* beat MASTER_*") {
    clean.set("COHORT_STORE_ADDR", "127.0.0.1");
    clean.set("COHORT_STORE_PORT", "1234");
    const Environment env = resolve_environment();
    CHECK(env.store_addr == "127.0.0.1");
    CHECK(env.store_port == 1234);
  }
}

TEST_CASE("Open MPI variables", "[environment][unit]") {
  CleanEnvironment clean;
  clean.set("OMPI_COMM_WORLD_RANK", "4");
  clean.set("OMPI_COMM_WORLD_SIZE", "6");
  clean.set("OMPI_COMM_WORLD_LOCAL_RANK", "1");
  clean.set("OMPI_COMM_WORLD_LOCAL_SIZE", "3");
  clean.set("OMPI_COMM_WORLD_NODE_RANK", "1");  // Open MPI's per-node rank, not a node index
  clean.set("OMPI_MCA_ess_base_jobid", "3547594753");
  const Environment env = resolve_environment();
  CHECK(env.source == LaunchSource::OpenMpi);
  CHECK(env.rank == 4);
  CHECK(env.world_size == 6);
  CHECK(env.local_rank == 1);
  CHECK(env.local_world_size == 3);
  CHECK(env.node_rank == 1);  // derived: rank 4 / 3 local ranks per node
  CHECK(env.num_nodes == 2);  // derived: 6 / 3
  CHECK(env.job_id == "3547594753");
  CHECK(env.store_addr.empty());
  CHECK(env.host_store);
  SECTION("MASTER_* a job script exported for torch: cohort's store takes the next port") {
    clean.set("MASTER_ADDR", "node0");
    clean.set("MASTER_PORT", "29500");
    const Environment with_master = resolve_environment();
    CHECK(with_master.store_addr == "node0");
    CHECK(with_master.store_port == 29501);
    clean.set("MASTER_PORT", "65535");
    expect_invalid("COHORT_STORE_PORT");
    clean.set("COHORT_STORE_PORT", "29600");
    CHECK(resolve_environment().store_port == 29600);
  }
}

TEST_CASE("MPICH / PMI variables", "[environment][unit]") {
  CleanEnvironment clean;
  clean.set("PMI_RANK", "2");
  clean.set("PMI_SIZE", "5");
  clean.set("MPI_LOCALRANKID", "2");
  clean.set("MPI_LOCALNRANKS", "5");
  clean.set("PMI_JOBID", "kvs_99");
  const Environment env = resolve_environment();
  CHECK(env.source == LaunchSource::Pmi);
  CHECK(env.rank == 2);
  CHECK(env.world_size == 5);
  CHECK(env.local_rank == 2);
  CHECK(env.local_world_size == 5);
  CHECK(env.node_rank == 0);
  CHECK(env.num_nodes == 1);
  CHECK(env.job_id == "kvs_99");
}

TEST_CASE("Slurm variables", "[environment][unit]") {
  CleanEnvironment clean;
  clean.set("SLURM_PROCID", "6");
  clean.set("SLURM_NTASKS", "7");
  clean.set("SLURM_LOCALID", "0");
  clean.set("SLURM_NODEID", "2");
  clean.set("SLURM_NNODES", "3");
  clean.set("SLURM_JOB_ID", "1234");
  clean.set("SLURM_STEP_ID", "0");
  clean.set("SLURM_TASKS_PER_NODE", "3(x2),1");
  const Environment env = resolve_environment();
  CHECK(env.source == LaunchSource::Slurm);
  CHECK(env.rank == 6);
  CHECK(env.world_size == 7);
  CHECK(env.local_rank == 0);
  CHECK(env.local_world_size == 1);  // the third node runs one task
  CHECK(env.node_rank == 2);
  CHECK(env.num_nodes == 3);
  CHECK(env.job_id == "1234.0");
  SECTION("an earlier node of the same list") {
    clean.set("SLURM_PROCID", "4");
    clean.set("SLURM_LOCALID", "1");
    clean.set("SLURM_NODEID", "1");
    CHECK(resolve_environment().local_world_size == 3);
  }
}

TEST_CASE(
    "Slurm: a batch script or salloc shell (no step) is a world of one; the step's counts "
    "come first",
    "[environment][unit]") {
  // What sbatch --ntasks=4 gives its batch script: task variables, the allocation's counts, no
  // step. Taken for rank 0 of 4, it waited for three ranks nobody starts.
  CleanEnvironment clean;
  clean.set("SLURM_PROCID", "0");
  clean.set("SLURM_NTASKS", "4");
  clean.set("SLURM_LOCALID", "0");
  clean.set("SLURM_NODEID", "0");
  clean.set("SLURM_NNODES", "2");
  clean.set("SLURM_JOB_ID", "77");
  clean.set("SLURM_TASKS_PER_NODE", "2(x2)");
  Environment env = resolve_environment();
  CHECK(env.source == LaunchSource::Standalone);
  CHECK(env.world_size == 1);
  CHECK(env.rank == 0);
  // srun inside it, as `srun -n 2 -N 1 --preserve-env` (the job's SLURM_NTASKS and SLURM_NNODES
  // kept): the step's own counts win.
  clean.set("SLURM_STEP_ID", "3");
  clean.set("SLURM_STEP_NUM_TASKS", "2");
  clean.set("SLURM_STEP_NUM_NODES", "1");
  clean.set("SLURM_STEP_TASKS_PER_NODE", "2");
  clean.set("SLURM_PROCID", "1");
  clean.set("SLURM_LOCALID", "1");
  env = resolve_environment();
  CHECK(env.source == LaunchSource::Slurm);
  CHECK(env.rank == 1);
  CHECK(env.world_size == 2);
  CHECK(env.num_nodes == 1);
  CHECK(env.local_world_size == 2);
  CHECK(env.job_id == "77.3");
}

TEST_CASE("precedence: config, then COHORT_*, then torchrun, Open MPI, PMI, Slurm",
          "[environment][unit]") {
  CleanEnvironment clean;
  clean.set("SLURM_PROCID", "0");
  clean.set("SLURM_NTASKS", "2");
  clean.set("SLURM_STEP_ID", "0");
  CHECK(resolve_environment().source == LaunchSource::Slurm);
  clean.set("PMI_RANK", "1");
  clean.set("PMI_SIZE", "3");
  CHECK(resolve_environment().source == LaunchSource::Pmi);
  clean.set("OMPI_COMM_WORLD_RANK", "2");
  clean.set("OMPI_COMM_WORLD_SIZE", "4");
  CHECK(resolve_environment().source == LaunchSource::OpenMpi);
  CHECK(resolve_environment().rank == 2);
  clean.set("RANK", "3");
  clean.set("WORLD_SIZE", "5");
  CHECK(resolve_environment().source == LaunchSource::Torchrun);
  CHECK(resolve_environment().world_size == 5);
  clean.set("COHORT_RANK", "4");
  clean.set("COHORT_WORLD_SIZE", "6");
  const Environment cohort_env = resolve_environment();
  CHECK(cohort_env.source == LaunchSource::Cohort);
  CHECK(cohort_env.rank == 4);
  CHECK(cohort_env.world_size == 6);

  EnvironmentConfig config;
  config.rank = 1;
  config.world_size = 7;
  config.store_addr = "::1";
  config.store_port = 4000;
  config.token = "explicit";
  config.job_id = "mine";
  clean.set("COHORT_TOKEN", "from-env");
  const Environment env = resolve_environment(config);
  CHECK(env.source == LaunchSource::Config);
  CHECK(env.rank == 1);
  CHECK(env.world_size == 7);
  CHECK(env.local_world_size == 7);  // no placement given: one node
  CHECK(env.local_rank == 1);
  CHECK(env.store_addr == "::1");
  CHECK(env.store_port == 4000);
  CHECK(env.token == "explicit");
  CHECK(env.job_id == "mine");
  CHECK_FALSE(env.host_store);

  // A config field alone overrides that field of the launcher's.
  EnvironmentConfig only_rank;
  only_rank.rank = 0;
  const Environment mixed = resolve_environment(only_rank);
  CHECK(mixed.source == LaunchSource::Cohort);
  CHECK(mixed.rank == 0);
  CHECK(mixed.world_size == 6);
  CHECK(mixed.token == "from-env");
}

TEST_CASE("local placement is derived when the launcher leaves it out", "[environment][unit]") {
  CleanEnvironment clean;
  clean.set("COHORT_RANK", "5");
  clean.set("COHORT_WORLD_SIZE", "6");
  SECTION("one node assumed") {
    const Environment env = resolve_environment();
    CHECK(env.local_rank == 5);
    CHECK(env.local_world_size == 6);
    CHECK(env.node_rank == 0);
    CHECK(env.num_nodes == 1);
  }
  SECTION("from the node count") {
    clean.set("COHORT_NNODES", "3");
    const Environment env = resolve_environment();
    CHECK(env.local_world_size == 2);
    CHECK(env.local_rank == 1);
    CHECK(env.node_rank == 2);
  }
  SECTION("from the local world size") {
    clean.set("COHORT_LOCAL_WORLD_SIZE", "3");
    const Environment env = resolve_environment();
    CHECK(env.num_nodes == 2);
    CHECK(env.node_rank == 1);
    CHECK(env.local_rank == 2);
  }
}

TEST_CASE("placement is derived without overflow at the largest world size",
          "[environment][unit]") {
  // Found by test/fuzz/environment: the derived node count was (world + local - 1) / local,
  // whose sum overflows an int (undefined behaviour) when both are 2^30, the largest accepted.
  CleanEnvironment clean;
  constexpr int largest = 1 << 30;
  clean.set("COHORT_RANK", "1073741823");
  clean.set("COHORT_WORLD_SIZE", "1073741824");
  SECTION("one node assumed") {
    const Environment env = resolve_environment();
    CHECK(env.local_world_size == largest);
    CHECK(env.local_rank == largest - 1);
    CHECK(env.num_nodes == 1);
    CHECK(env.node_rank == 0);
  }
  SECTION("node count rounded up") {
    clean.set("COHORT_LOCAL_WORLD_SIZE", "1073741823");
    const Environment env = resolve_environment();
    CHECK(env.num_nodes == 2);
    CHECK(env.node_rank == 1);
    CHECK(env.local_rank == 0);
  }
}

TEST_CASE("bad and inconsistent values name the variable", "[environment][unit]") {
  CleanEnvironment clean;
  SECTION("rank not below world size") {
    clean.set("COHORT_RANK", "4");
    clean.set("COHORT_WORLD_SIZE", "4");
    expect_invalid("COHORT_RANK");
  }
  SECTION("rank without world size") {
    clean.set("RANK", "1");
    expect_invalid("WORLD_SIZE");
  }
  SECTION("world size without rank") {
    clean.set("OMPI_COMM_WORLD_SIZE", "3");
    expect_invalid("OMPI_COMM_WORLD_RANK");
  }
  SECTION("non-numeric") {
    clean.set("PMI_RANK", "one");
    clean.set("PMI_SIZE", "2");
    expect_invalid("PMI_RANK");
  }
  SECTION("trailing garbage") {
    clean.set("SLURM_PROCID", "0");
    clean.set("SLURM_STEP_ID", "0");
    clean.set("SLURM_NTASKS", "2x");
    expect_invalid("SLURM_NTASKS");
  }
  SECTION("negative rank") {
    clean.set("COHORT_RANK", "-1");
    clean.set("COHORT_WORLD_SIZE", "2");
    expect_invalid("COHORT_RANK");
  }
  SECTION("zero world size") {
    clean.set("COHORT_RANK", "0");
    clean.set("COHORT_WORLD_SIZE", "0");
    expect_invalid("COHORT_WORLD_SIZE");
  }
  SECTION("local rank not below local world size") {
    clean.set("COHORT_RANK", "0");
    clean.set("COHORT_WORLD_SIZE", "4");
    clean.set("COHORT_LOCAL_RANK", "2");
    clean.set("COHORT_LOCAL_WORLD_SIZE", "2");
    expect_invalid("COHORT_LOCAL_RANK");
  }
  SECTION("node rank not below node count") {
    clean.set("RANK", "0");
    clean.set("WORLD_SIZE", "4");
    clean.set("GROUP_RANK", "2");
    clean.set("GROUP_WORLD_SIZE", "2");
    expect_invalid("GROUP_RANK");
  }
  SECTION("port out of range") {
    clean.set("MASTER_PORT", "70000");
    expect_invalid("MASTER_PORT");
  }
  SECTION("port not a number") {
    clean.set("COHORT_STORE_PORT", "http");
    expect_invalid("COHORT_STORE_PORT");
  }
  SECTION("config rank beyond the launcher's world") {
    clean.set("COHORT_RANK", "0");
    clean.set("COHORT_WORLD_SIZE", "2");
    EnvironmentConfig config;
    config.rank = 2;
    expect_invalid("EnvironmentConfig::rank", config);
  }
  SECTION("config rank with no world size anywhere") {
    EnvironmentConfig config;
    config.rank = 0;
    expect_invalid("world_size", config);
  }
  SECTION("malformed Slurm tasks per node") {
    clean.set("SLURM_PROCID", "0");
    clean.set("SLURM_STEP_ID", "0");
    clean.set("SLURM_NTASKS", "2");
    clean.set("SLURM_TASKS_PER_NODE", "2(x");
    expect_invalid("SLURM_TASKS_PER_NODE");
  }
}
