// Creating communicators: Communicator::create() for a world, init() for the usual one-call
// start, and the wiring shared with split().

#include <cohort/communicator.hpp>
#include <cohort/error.hpp>
#include <cohort/log.hpp>

#include "comm/communicator_impl.hpp"
#include "comm/tunables.hpp"
#include "core/log.hpp"
#include "transport/tag.hpp"
#include "transport/transport_factory.hpp"

#include <fmt/format.h>

namespace cohort {
namespace comm {
namespace {

class ConcreteCommunicator final : public Communicator {
 public:
  explicit ConcreteCommunicator(std::unique_ptr<Impl> impl) : Communicator(std::move(impl)) {}
};

}  // namespace

std::shared_ptr<Communicator> make_communicator(std::unique_ptr<Communicator::Impl> impl) {
  return std::make_shared<ConcreteCommunicator>(std::move(impl));
}

std::unique_ptr<Communicator::Impl> wire_communicator(std::shared_ptr<Store> store,
                                                      std::uint32_t id, int rank, int size,
                                                      int node_rank, int local_size,
                                                      std::chrono::milliseconds default_timeout,
                                                      bool debug_detail) {
  auto impl = std::make_unique<Communicator::Impl>();
  impl->rank = rank;
  impl->size = size;
  impl->id = id;
  impl->node_rank = node_rank;
  impl->local_size = local_size;
  impl->store = std::move(store);
  impl->default_timeout = default_timeout;
  impl->debug_detail = debug_detail;
  transport::TransportOptions options;
  options.local_world_size = local_size;
  options.connect_timeout = default_timeout;
  // Each communicator's transport keys live under its own prefix, so concurrent wiring of
  // several communicators never reads another's addresses.
  impl->transport = transport::create_transport(*impl->store, fmt::format("cohort/comm/{}", id),
                                                rank, size, options);
  impl->arena = transport::SharedArena::create(*impl->store, fmt::format("cohort/comm/{}", id),
                                               rank, size, local_size, default_timeout);
  impl->executor =
      std::make_unique<Executor>(*impl->transport, impl->arena.get(), rank, size, id);
  COHORT_LOG_DEBUG("communicator {}: rank {} of {} over {}{}", id, rank, size,
                   impl->transport->description(),
                   impl->arena ? " and " + impl->arena->description() : std::string());
  return impl;
}

}  // namespace comm

std::shared_ptr<Communicator> Communicator::create(const Environment& env,
                                                   std::shared_ptr<Store> store,
                                                   const CommunicatorOptions& options) {
  if (!store) throw Error(ErrorCode::InvalidArgument, "Communicator::create: store is null");
  if (env.world_size < 1 || static_cast<std::uint32_t>(env.world_size) > transport::kMaxRanks) {
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("Communicator::create: world size {} is outside [1, {}]",
                            env.world_size, transport::kMaxRanks));
  }
  if (env.rank < 0 || env.rank >= env.world_size) {
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("Communicator::create: rank {} is out of range for world size {}",
                            env.rank, env.world_size));
  }
  comm::check_timeout("Communicator::create", options.timeout);
  const comm::Tunables tunables = comm::read_tunables();
  const std::chrono::milliseconds timeout = options.timeout.value_or(tunables.timeout);

  // The first world a job creates is communicator 0. Should a job create further worlds over the
  // same store (every rank in the same order), each gets a fresh id so their keys never collide.
  const std::int64_t generation = store->add(fmt::format("cohort/world/created/{}", env.rank), 1);
  std::uint32_t id = 0;
  if (generation > 1) {
    id = comm::agree_on_id(*store, fmt::format("cohort/world/{}/id", generation), env.rank == 0,
                           timeout);
  }
  return comm::make_communicator(
      comm::wire_communicator(std::move(store), id, env.rank, env.world_size, env.node_rank,
                              std::max(1, env.local_world_size), timeout, tunables.debug_detail));
}

std::shared_ptr<Communicator> init(const InitOptions& options) {
  const Environment env = resolve_environment(options.environment);
  set_log_rank(env.rank, env.world_size);
  std::shared_ptr<Store> store = connect_store(env);
  return Communicator::create(env, std::move(store), options.communicator);
}

}  // namespace cohort
