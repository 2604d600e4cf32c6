#include "soak_rank.hpp"

#include <cohort/communicator.hpp>
#include <cohort/environment.hpp>
#include <cohort/store.hpp>

#include <exception>
#include <iostream>

namespace cohort::soak::test {

int run_soak_rank(const RankPlacement& placement, const SessionOptions& options) {
  try {
    EnvironmentConfig config;
    config.rank = placement.rank;
    config.world_size = placement.world_size;
    // One node: every rank shares the host, so the shared-memory algorithms and the process
    // watch (a dead peer's pid) are in play, as they are for any single-host job.
    config.local_world_size = placement.world_size;
    config.store_addr = placement.store_host;
    config.store_port = placement.store_port;
    config.token = placement.token;
    config.host_store = false;  // the parent hosts it
    const Environment env = resolve_environment(config);
    std::shared_ptr<Store> store = connect_store(env);
    CommunicatorOptions comm_options;
    comm_options.timeout = options.soak.timeout;
    const auto world = Communicator::create(env, store, comm_options);
    return run_session(world, *store, options, std::cerr);
  } catch (const std::exception& e) {
    std::cerr << "soak rank " << placement.rank << ": " << e.what() << std::endl;
    return 1;
  }
}

}  // namespace cohort::soak::test
