// Creating communicators: Communicator::create() for a world, init() for the usual one-call
// start, and the wiring shared with split().

#include <cohort/communicator.hpp>
#include <cohort/error.hpp>
#include <cohort/log.hpp>

#include "algorithms/selection.hpp"
#include "comm/communicator_impl.hpp"
#include "core/check.hpp"
#include "core/log.hpp"
#include "core/tunables.hpp"
#include "reduce/reduce.hpp"
#include "transport/tag.hpp"
#include "transport/transport_factory.hpp"
#include "transport/wait_policy.hpp"

#include <fmt/format.h>

#include <string_view>

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

namespace {

std::unique_ptr<Communicator::Impl> new_impl(std::shared_ptr<Store> store,
                                             const CommunicatorSetup& setup) {
  auto impl = std::make_unique<Communicator::Impl>();
  impl->rank = setup.rank;
  impl->size = setup.size;
  impl->id = setup.id;
  impl->node_rank = setup.node_rank;
  impl->local_size = setup.local_size;
  impl->host_ranks = setup.host_ranks;
  impl->store = std::move(store);
  impl->default_timeout = setup.default_timeout;
  impl->debug_detail = setup.debug_detail;
  impl->job_id = setup.job_id;
  return impl;
}

/// The parts every communicator has once its transport exists: the arena (not set up yet) and
/// the executor (its thread starts on first async use).
void finish_impl(Communicator::Impl& impl, const CommunicatorSetup& setup, std::uint32_t tag_id,
                 std::optional<gpu::NcclChild> nccl = std::nullopt) {
  const std::string prefix = fmt::format("cohort/comm/{}", impl.id);
  impl.gpu = nccl ? std::make_unique<gpu::DeviceBackend>(impl.store, prefix, impl.rank, impl.size,
                                                         std::move(*nccl))
                  : std::make_unique<gpu::DeviceBackend>(impl.store, prefix, impl.rank, impl.size);
  impl.arenas = std::make_unique<transport::LazyArena>(impl.host_ranks,
                                                       setup.arena_eligible && impl.size > 1);
  // Hosts are told apart only when the arena cannot span the communicator; three ranks are the
  // fewest that can make two hosts with two ranks on one.
  impl.host_groups = std::make_unique<algorithms::HostGroups>(impl.host_ranks, impl.size >= 3);
  impl.tag_id = tag_id;
  impl.executor =
      std::make_unique<Executor>(*impl.transport, impl.arenas.get(), impl.host_groups.get(),
                                 impl.rank, impl.size, impl.id, tag_id, impl.job_id);
  const transport::WaitPolicy policy =
      transport::choose_wait_policy(impl.host_ranks, impl.transport->host_cpus(), tunables().spin);
  impl.executor->set_wait_spin(policy.yield_while_spinning ? std::chrono::microseconds(0)
                                                           : policy.spin);
  COHORT_LOG_DEBUG("communicator {}: rank {} of {} over {} (tag id {})", impl.id, impl.rank,
                   impl.size, impl.transport->description(), tag_id);
}

}  // namespace

std::unique_ptr<Communicator::Impl> wire_world(std::shared_ptr<Store> store,
                                               const CommunicatorSetup& setup) {
  auto impl = new_impl(std::move(store), setup);
  impl->ids = std::make_shared<IdBlocks>();
  transport::TransportOptions options;
  options.local_world_size = setup.host_ranks;
  COHORT_CHECK(setup.connect_deadline != std::chrono::steady_clock::time_point{});
  options.connect_timeout = transport::time_left(setup.connect_deadline);
  // Each world's transport keys live under its own prefix, so concurrent wiring of several
  // worlds never reads another's addresses.
  impl->transport = transport::create_transport(
      *impl->store, fmt::format("cohort/comm/{}", setup.id), setup.rank, setup.size, options);
  finish_impl(*impl, setup, 0);
  return impl;
}

std::unique_ptr<Communicator::Impl> derive_communicator(const Communicator::Impl& parent,
                                                        const CommunicatorSetup& setup,
                                                        std::span<const int> members,
                                                        transport::TagIdClaim tag,
                                                        std::optional<gpu::NcclChild> nccl) {
  auto impl = new_impl(parent.store, setup);
  impl->ids = parent.ids;
  const std::uint32_t tag_id = tag.id();
  impl->transport = parent.transport->derive(members, setup.rank, std::move(tag));
  finish_impl(*impl, setup, tag_id, std::move(nccl));
  return impl;
}

}  // namespace comm

namespace {

/// Start-up checks once the tunables have just been read afresh (reload_tunables()): applies
/// COHORT_LOG_LEVEL and COHORT_KERNEL_ISA (refusing an instruction set this CPU lacks), parses
/// COHORT_ALGO so a typo fails at init rather than at the first collective, and at info level
/// logs every tunable's value.
void check_tunables_at_start() {
  log::apply_level_from_tunables();
  reduce::apply_kernel_isa_tunable();
  algorithms::environment_algorithm_overrides();
  // Every rank logs, not only rank 0: launchers may give ranks different environments, and a
  // value on one rank can change what all do (COHORT_SHARED_MEMORY=off), so each rank's own
  // values are the useful record; the rank prefix on each line tells them apart. Info is a
  // level users ask for, so the lines (one per tunable per rank) are wanted there.
  if (!log::enabled(log::Level::Info)) return;
  COHORT_LOG_INFO("reduction and conversion kernels: {}", reduce::active_isa());
  const std::string description = describe_tunables();
  std::string_view rest = description;
  while (!rest.empty()) {
    const std::size_t end = rest.find('\n');
    COHORT_LOG_INFO("tunable {}", rest.substr(0, end));
    rest = end == std::string_view::npos ? std::string_view{} : rest.substr(end + 1);
  }
}

/// Communicator::create() without reading the tunables again (init() has just read them).
std::shared_ptr<Communicator> create_world(const Environment& env, std::shared_ptr<Store> store,
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
  const Tunables& values = tunables();
  const std::chrono::milliseconds timeout = options.timeout.value_or(values.timeout);
  // One deadline for every stage of connecting (agreeing on the id, the host-span verdict, each
  // peer's address, the handshakes): a peer slow at each stage must not stretch create() to a
  // multiple of `timeout`.
  const auto deadline = std::chrono::steady_clock::now() + timeout;

  // The first world a job creates is communicator 0. Should a job create further worlds over the
  // same store (every rank in the same order), each gets a fresh id so their keys never collide.
  // The counters are one key per rank however many worlds are made; each later world's id key is
  // erased by rank 0 once every rank has read it (below).
  const std::int64_t generation = store->add(fmt::format("cohort/world/created/{}", env.rank), 1);
  const std::string id_key = fmt::format("cohort/world/{}/id", generation);
  std::uint32_t id = 0;
  // A stage that runs out of the deadline says which deadline it was: its own message gives
  // only what was left of it ("timed out after 0 ms").
  const auto past_deadline = [&](const Error& e) {
    return Error(ErrorCode::Timeout,
                 fmt::format("Communicator::create: rank {} of {} was not connected within its "
                             "{} ms timeout: {}",
                             env.rank, env.world_size, timeout.count(), e.message()),
                 ErrorContext{.peers = e.context().peers});
  };
  try {
    if (generation > 1)
      id = comm::agree_on_id(*store, id_key, env.rank == 0, transport::time_left(deadline));
  } catch (const Error& e) {
    if (e.code() == ErrorCode::Timeout) throw past_deadline(e);
    throw;
  }
  comm::CommunicatorSetup setup;
  setup.id = id;
  setup.rank = env.rank;
  setup.size = env.world_size;
  setup.node_rank = env.node_rank;
  setup.local_size = std::max(1, env.local_world_size);
  setup.host_ranks = setup.local_size;
  setup.default_timeout = timeout;
  setup.connect_deadline = deadline;
  setup.debug_detail = values.debug_detail;
  setup.job_id = env.job_id;
  // COHORT_DEBUG is agreed: one rank fingerprinting its ops while the others do not would make
  // every op wait for messages that never come. Any rank asking for it turns it on everywhere.
  // Each rank adds its vote before wiring; wiring returns only after every rank has started
  // wiring, so after it the sum holds every vote.
  const std::string debug_key = fmt::format("cohort/world/{}/debug", generation);
  store->add(debug_key, values.debug_detail ? 1 : 0);
  std::unique_ptr<Communicator::Impl> impl;
  try {
    impl = comm::wire_world(store, setup);
  } catch (const Error& e) {
    if (e.code() == ErrorCode::Timeout) throw past_deadline(e);
    throw;
  }
  const bool any_debug = store->add(debug_key, 0) > 0;
  if (any_debug && !impl->debug_detail)
    COHORT_LOG_INFO("COHORT_DEBUG=detail is set on another rank: fingerprinting every op here too");
  impl->debug_detail = any_debug;
  // The last rank to read the votes erases them, so worlds created in a loop leave no keys.
  const std::string read_key = debug_key + "/read";
  if (store->add(read_key, 1) == env.world_size) {
    store->erase(debug_key);
    store->erase(read_key);
  }
  if (generation > 1 && env.rank == 0) {
    // Every rank read the id before wiring, and wiring returns only once every rank has
    // connected to this one: no reader is left.
    try {
      store->erase(id_key);
    } catch (const Error& e) {
      COHORT_LOG_WARN("could not erase the store key '{}': {}", id_key, e.what());
    }
  }
  return comm::make_communicator(std::move(impl));
}

}  // namespace

std::shared_ptr<Communicator> Communicator::create(const Environment& env,
                                                   std::shared_ptr<Store> store,
                                                   const CommunicatorOptions& options) {
  // Read afresh so variables set in-process before this count, and a malformed one fails here.
  reload_tunables();
  check_tunables_at_start();
  return create_world(env, std::move(store), options);
}

std::shared_ptr<Communicator> init(const InitOptions& options) {
  // Read first, so a malformed tunable is the error init() reports, naming the variable.
  // (connect_store() reads them again: the same environment, so the same values.)
  reload_tunables();
  const Environment env = resolve_environment(options.environment);
  set_log_rank(env.rank, env.world_size);
  check_tunables_at_start();
  std::shared_ptr<Store> store = connect_store(env);
  return create_world(env, std::move(store), options.communicator);
}

}  // namespace cohort
