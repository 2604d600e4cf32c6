// resolve_environment(): where this process sits in the job, from an explicit config and the
// variables each launcher exports. See include/cohort/environment.hpp for the rules; the tables
// below are the single place that names every launcher's variables.

#include <cohort/environment.hpp>
#include <cohort/error.hpp>

#include "core/log.hpp"

#include <charconv>
#include <cstdlib>
#include <string>
#include <vector>

namespace cohort {
namespace {

// The variables one launcher family exports. nullptr: the family has no such variable.
struct LauncherVariables {
  LaunchSource source;
  const char* rank;
  const char* world_size;
  const char* local_rank;
  const char* local_world_size;
  const char* node_rank;
  const char* num_nodes;
  std::vector<const char*> job_id;  // first one set wins
};

// Precedence order. Open MPI's OMPI_COMM_WORLD_NODE_RANK is deliberately not used as the node
// index: Open MPI defines it as the process's rank among all jobs' processes on its node, not
// the node's number. Open MPI and PMI node numbers are derived instead (see derive_layout).
const std::vector<LauncherVariables>& launcher_table() {
  static const std::vector<LauncherVariables> table = {
      {LaunchSource::Cohort,
       "COHORT_RANK",
       "COHORT_WORLD_SIZE",
       "COHORT_LOCAL_RANK",
       "COHORT_LOCAL_WORLD_SIZE",
       "COHORT_NODE_RANK",
       "COHORT_NNODES",
       {"COHORT_JOB_ID"}},
      {LaunchSource::Torchrun,
       "RANK",
       "WORLD_SIZE",
       "LOCAL_RANK",
       "LOCAL_WORLD_SIZE",
       "GROUP_RANK",
       "GROUP_WORLD_SIZE",
       {"TORCHELASTIC_RUN_ID"}},
      {LaunchSource::OpenMpi,
       "OMPI_COMM_WORLD_RANK",
       "OMPI_COMM_WORLD_SIZE",
       "OMPI_COMM_WORLD_LOCAL_RANK",
       "OMPI_COMM_WORLD_LOCAL_SIZE",
       nullptr,
       nullptr,
       {"OMPI_MCA_ess_base_jobid", "OMPI_MCA_orte_ess_jobid", "PMIX_NAMESPACE"}},
      {LaunchSource::Pmi,
       "PMI_RANK",
       "PMI_SIZE",
       "MPI_LOCALRANKID",
       "MPI_LOCALNRANKS",
       nullptr,
       nullptr,
       {"PMI_JOBID", "PMI_KVSNAME", "PMIX_NAMESPACE"}},
      {LaunchSource::Slurm,
       "SLURM_PROCID",
       "SLURM_NTASKS",
       "SLURM_LOCALID",
       nullptr,
       "SLURM_NODEID",
       "SLURM_NNODES",
       {}},
  };
  return table;
}

const char* variable(const char* name) {
  if (name == nullptr) return nullptr;
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : nullptr;
}

long long parse_integer(const std::string& name, const std::string& text, long long min,
                        long long max) {
  long long value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size())
    throw Error(ErrorCode::InvalidArgument, name + "='" + text + "' is not an integer");
  if (value < min || value > max)
    throw Error(ErrorCode::InvalidArgument, name + "=" + text + " is out of range [" +
                                                std::to_string(min) + ", " + std::to_string(max) +
                                                "]");
  return value;
}

// An integer field: from the config when set there, else from `name` (when not nullptr).
struct Field {
  std::optional<int> value;
  std::string origin;  // the variable or config field it came from, for messages
};

Field integer_field(const std::optional<int>& configured, const char* config_name,
                    const char* variable_name, long long min) {
  if (configured) {
    parse_integer(std::string("EnvironmentConfig::") + config_name, std::to_string(*configured),
                  min, 1 << 30);
    return {*configured, std::string("EnvironmentConfig::") + config_name};
  }
  if (const char* text = variable(variable_name))
    return {static_cast<int>(parse_integer(variable_name, text, min, 1 << 30)), variable_name};
  return {};
}

// Slurm's "2(x3),1" tasks-per-node list: entry `node` of the expanded list.
std::optional<int> slurm_tasks_on_node(int node) {
  const char* name =
      variable("SLURM_STEP_TASKS_PER_NODE") ? "SLURM_STEP_TASKS_PER_NODE" : "SLURM_TASKS_PER_NODE";
  const char* text = variable(name);
  if (text == nullptr) return std::nullopt;
  const std::string list = text;
  int index = 0;
  std::size_t at = 0;
  while (at < list.size()) {
    std::size_t end = list.find(',', at);
    if (end == std::string::npos) end = list.size();
    std::string item = list.substr(at, end - at);
    long long repeat = 1;
    if (const auto paren = item.find("(x"); paren != std::string::npos) {
      if (item.back() != ')')
        throw Error(ErrorCode::InvalidArgument, std::string(name) + "='" + list + "' is malformed");
      repeat = parse_integer(name, item.substr(paren + 2, item.size() - paren - 3), 1, 1 << 20);
      item = item.substr(0, paren);
    }
    const int tasks = static_cast<int>(parse_integer(name, item, 1, 1 << 20));
    if (node < index + repeat) return tasks;
    index += static_cast<int>(repeat);
    at = end + 1;
  }
  throw Error(
      ErrorCode::InvalidArgument,
      std::string(name) + "='" + list + "' lists fewer nodes than node " + std::to_string(node));
}

// a / b rounded up for a >= 0, b >= 1. Not (a + b - 1) / b: sizes go up to 2^30, and two of
// them summed overflow an int.
int divide_rounding_up(int a, int b) {
  return a / b + (a % b != 0 ? 1 : 0);
}

// A process with Slurm's task variables that srun did not start (see resolve_environment).
void warn_not_an_srun_task() {
  const char* tasks = variable("SLURM_NTASKS");
  if (tasks == nullptr || std::string(tasks) == "1") return;
  COHORT_LOG_WARN(
      "SLURM_NTASKS={} but this process was not started by srun (no SLURM_STEP_ID: a batch script "
      "or an salloc shell): running as a world of one. Start the ranks with srun, or with "
      "cohort-run inside the allocation",
      tasks);
}

void require(bool ok, const std::string& message) {
  if (!ok) throw Error(ErrorCode::InvalidArgument, message);
}

std::string job_id_for(const LauncherVariables* family) {
  if (family == nullptr) return {};
  if (family->source == LaunchSource::Slurm) {
    const char* job = variable("SLURM_JOB_ID");
    if (job == nullptr) job = variable("SLURM_JOBID");
    if (job == nullptr) return {};
    const char* step = variable("SLURM_STEP_ID");
    if (step == nullptr) step = variable("SLURM_STEPID");
    return step ? std::string(job) + "." + step : std::string(job);
  }
  for (const char* name : family->job_id)
    if (const char* value = variable(name)) return value;
  return {};
}

}  // namespace

const char* launch_source_name(LaunchSource source) {
  switch (source) {
    case LaunchSource::Config: return "config";
    case LaunchSource::Cohort: return "cohort";
    case LaunchSource::Torchrun: return "torchrun";
    case LaunchSource::OpenMpi: return "openmpi";
    case LaunchSource::Pmi: return "pmi";
    case LaunchSource::Slurm: return "slurm";
    case LaunchSource::Standalone: return "standalone";
  }
  return "unknown";
}

Environment resolve_environment(const EnvironmentConfig& config) {
  Environment env;

  // 1. The source: the config when it names both rank and world size, else the first launcher
  //    family exporting a rank or a world size.
  const LauncherVariables* family = nullptr;
  LauncherVariables slurm_step;  // Slurm's entry with the step's own counts, when srun gives them
  if (config.rank && config.world_size) {
    env.source = LaunchSource::Config;
  } else {
    for (const auto& candidate : launcher_table()) {
      if (!variable(candidate.rank) && !variable(candidate.world_size)) continue;
      if (candidate.source == LaunchSource::Slurm) {
        // Only srun's tasks are ranks: a batch script (sbatch) or an salloc shell has
        // SLURM_PROCID=0 and the allocation's SLURM_NTASKS too, and would wait for ranks that
        // nobody starts. srun sets SLURM_STEP_ID (and, as --preserve-env may keep the job's
        // SLURM_NTASKS, the step's own counts).
        if (!variable("SLURM_STEP_ID") && !variable("SLURM_STEPID")) {
          warn_not_an_srun_task();
          continue;
        }
        slurm_step = candidate;
        if (variable("SLURM_STEP_NUM_TASKS")) slurm_step.world_size = "SLURM_STEP_NUM_TASKS";
        if (variable("SLURM_STEP_NUM_NODES")) slurm_step.num_nodes = "SLURM_STEP_NUM_NODES";
        family = &slurm_step;
      } else {
        family = &candidate;
      }
      env.source = candidate.source;
      break;
    }
    if (family == nullptr && (config.rank || config.world_size))
      throw Error(ErrorCode::InvalidArgument,
                  std::string("EnvironmentConfig sets ") + (config.rank ? "rank" : "world_size") +
                      " but not " + (config.rank ? "world_size" : "rank") +
                      ", and no launcher variables supply it");
  }
  const auto name_of = [&](const char* LauncherVariables::*member) -> const char* {
    return family ? family->*member : nullptr;
  };

  // 2. Rank and world size, which must come together.
  const Field rank = integer_field(config.rank, "rank", name_of(&LauncherVariables::rank), 0);
  const Field world =
      integer_field(config.world_size, "world_size", name_of(&LauncherVariables::world_size), 1);
  if (family != nullptr) {
    require(rank.value.has_value(),
            world.origin + " is set but " + family->rank + " (the rank) is not");
    require(world.value.has_value(),
            rank.origin + " is set but " + family->world_size + " (the world size) is not");
  }
  if (rank.value) {
    env.rank = *rank.value;
    env.world_size = *world.value;
    require(env.rank < env.world_size, rank.origin + "=" + std::to_string(env.rank) +
                                           " is not below " + world.origin + "=" +
                                           std::to_string(env.world_size));
  }

  // 3. Placement on nodes; whatever the launcher leaves out is derived.
  Field local_rank =
      integer_field(config.local_rank, "local_rank", name_of(&LauncherVariables::local_rank), 0);
  Field local_world = integer_field(config.local_world_size, "local_world_size",
                                    name_of(&LauncherVariables::local_world_size), 1);
  Field node_rank =
      integer_field(config.node_rank, "node_rank", name_of(&LauncherVariables::node_rank), 0);
  Field num_nodes =
      integer_field(config.num_nodes, "num_nodes", name_of(&LauncherVariables::num_nodes), 1);
  if (!local_world.value && family && family->source == LaunchSource::Slurm)
    if (const auto tasks = slurm_tasks_on_node(node_rank.value.value_or(0)))
      local_world = {*tasks, "SLURM_TASKS_PER_NODE"};
  // Without node information the job is taken to be on one node: every rank is local.
  if (!local_world.value) {
    if (num_nodes.value && env.world_size % *num_nodes.value == 0)
      local_world = {env.world_size / *num_nodes.value, num_nodes.origin + " (derived)"};
    else if (!num_nodes.value || *num_nodes.value == 1)
      local_world = {env.world_size, "the world size (one node assumed)"};
    else
      local_world = {divide_rounding_up(env.world_size, *num_nodes.value),
                     num_nodes.origin + " (derived, rounded up)"};
  }
  if (!local_rank.value) local_rank = {env.rank % *local_world.value, "derived local rank"};
  if (!num_nodes.value)
    num_nodes = {divide_rounding_up(env.world_size, *local_world.value), "derived node count"};
  // Ranks are assumed placed in blocks of local_world_size per node (the launchers' default).
  if (!node_rank.value) node_rank = {env.rank / *local_world.value, "derived node rank"};
  env.local_rank = *local_rank.value;
  env.local_world_size = *local_world.value;
  env.node_rank = *node_rank.value;
  env.num_nodes = *num_nodes.value;
  require(env.local_world_size <= env.world_size,
          local_world.origin + "=" + std::to_string(env.local_world_size) +
              " exceeds the world size " + std::to_string(env.world_size));
  require(env.local_rank < env.local_world_size,
          local_rank.origin + "=" + std::to_string(env.local_rank) + " is not below " +
              local_world.origin + "=" + std::to_string(env.local_world_size));
  require(env.num_nodes <= env.world_size, num_nodes.origin + "=" + std::to_string(env.num_nodes) +
                                               " exceeds the world size " +
                                               std::to_string(env.world_size));
  require(env.node_rank < env.num_nodes, node_rank.origin + "=" + std::to_string(env.node_rank) +
                                             " is not below " + num_nodes.origin + "=" +
                                             std::to_string(env.num_nodes));

  // 4. The store: explicit, then COHORT_*, then torchrun's MASTER_* (honoured under any launcher,
  //    since job scripts for mpirun and srun commonly export them too).
  if (config.store_addr) {
    env.store_addr = *config.store_addr;
  } else if (const char* addr = variable("COHORT_STORE_ADDR")) {
    env.store_addr = addr;
  } else if (const char* master = variable("MASTER_ADDR")) {
    env.store_addr = master;
  }
  if (config.store_port) {
    require(*config.store_port != 0, "EnvironmentConfig::store_port is 0");
    env.store_port = *config.store_port;
  } else if (const char* port = variable("COHORT_STORE_PORT")) {
    env.store_port = static_cast<std::uint16_t>(parse_integer("COHORT_STORE_PORT", port, 1, 65535));
  } else if (const char* master = variable("MASTER_PORT")) {
    // MASTER_PORT is torch.distributed's: its rank 0 (or a recent torchrun agent) binds a store
    // there, and job scripts for srun and mpirun export it for torch as torchrun does. Cohort's
    // store takes the next port under every launcher, so a program using both never has its two
    // rank-0 stores race for one port (and every rank derives the same).
    const auto port = parse_integer("MASTER_PORT", master, 1, 65535);
    require(port < 65535,
            "MASTER_PORT=65535 leaves no port for cohort's store (MASTER_PORT + 1); set "
            "COHORT_STORE_PORT");
    env.store_port = static_cast<std::uint16_t>(port + 1);
  }
  env.token =
      config.token ? *config.token : (variable("COHORT_TOKEN") ? variable("COHORT_TOKEN") : "");
  if (config.job_id)
    env.job_id = *config.job_id;
  else if (const char* job = variable("COHORT_JOB_ID"))
    env.job_id = job;
  else
    env.job_id = job_id_for(family);

  // 5. Who hosts the store: cohort-run and launch() host it (Cohort), a caller passing an
  //    explicit config hosts it (Config); under other launchers nobody does, so rank 0 must.
  if (config.host_store) {
    env.host_store = *config.host_store;
  } else if (const char* text = variable("COHORT_HOST_STORE")) {
    env.host_store = parse_integer("COHORT_HOST_STORE", text, 0, 1) == 1;
  } else {
    env.host_store = env.source != LaunchSource::Cohort && env.source != LaunchSource::Config &&
                     env.source != LaunchSource::Standalone;
  }
  return env;
}

}  // namespace cohort
