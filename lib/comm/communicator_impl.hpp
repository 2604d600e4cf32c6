#pragma once

// The state behind a Communicator, shared by communicator.cpp (the collectives), split.cpp
// (split/dup) and communicator_factory.cpp (create/init).

#include <cohort/communicator.hpp>

#include "algorithms/dispatch.hpp"
#include "algorithms/host_groups.hpp"
#include "algorithms/op_context.hpp"
#include "algorithms/selection.hpp"
#include "comm/device_ops.hpp"
#include "comm/executor.hpp"
#include "comm/fingerprint.hpp"
#include "comm/id_blocks.hpp"
#include "comm/placement.hpp"
#include "comm/validated_args.hpp"
#include "comm/validation.hpp"
#include "comm/work_state.hpp"
#include "core/fork_generation.hpp"
#include "gpu/device_backend.hpp"
#include "transport/lazy_arena.hpp"
#include "transport/transport.hpp"

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace cohort {

namespace comm {
/// What an *_async collective holds while queued: its buffers' owners (alive until it ran) and
/// the memory it reads and writes (which sends and receives called after it may pass it).
struct Held {
  std::vector<std::shared_ptr<void>> owners;
  Footprint footprint;
};

/// `buffers`, less what the op does not use on this rank: validation leaves the pointer null
/// for a non-root's broadcast and scatter input and its reduce and gather output. Holding a
/// send back behind a reduce_async whose output buffer a non-root passes but the op never
/// writes would bring back the wait for the collective that posting ahead of it avoids.
template <class Args>
Footprint used_part(Footprint buffers, const Args& args) {
  if constexpr (requires { args.in; })
    if (args.in == nullptr) buffers.reads = {};
  if constexpr (requires { args.out; })
    if (args.out == nullptr) buffers.writes = {};
  return buffers;
}
}  // namespace comm

struct Communicator::Impl {
  /// The fork of the program that made it (fork_generation()): a child forked since holds a
  /// copy it must not tear down.
  std::uint32_t fork_generation = cohort::fork_generation();
  int rank = 0;
  int size = 1;
  std::uint32_t id = 0;
  /// This rank's node, and how many ranks of this communicator share it.
  int node_rank = 0;
  int local_size = 1;
  /// How many ranks of the job share this host: they compete for its cores, so busy-polling is
  /// sized by it.
  int host_ranks = 1;
  /// The job-wide store (not prefixed): sub-communicators are wired through it too.
  std::shared_ptr<Store> store;
  std::chrono::milliseconds default_timeout{0};
  bool debug_detail = false;
  /// The launcher's job id (may be empty): names the flight record's file.
  std::string job_id;
  /// Ids for communicators split from this one (shared with the whole family).
  std::shared_ptr<comm::IdBlocks> ids;
  /// Derived from the world's (sub-communicators share its connections).
  std::unique_ptr<transport::Transport> transport;
  /// Shared segment for the shared-memory algorithms, set up on first use when every rank is on
  /// this host.
  std::unique_ptr<transport::LazyArena> arenas;
  /// The ranks grouped by host, for hierarchical algorithms, worked out on first use.
  std::unique_ptr<algorithms::HostGroups> host_groups;
  /// For inputs that must be copied aside (aliasing alltoall, in-place reduce); only the thread
  /// driving the transport touches it.
  algorithms::ScratchPool staging;
  /// The communicator's field in message tags (transport/tag_ids.hpp).
  std::uint32_t tag_id = 0;
  /// Destroyed after the executor (whose thread has ended by then) and before the scratch above:
  /// hands `staging` and the host groups' scratch to the transport (retain_until_quiet), which
  /// keeps them while a failed op's receive UCX still fills may be writing into them.
  struct ScratchRetirement {
    Impl* impl;
    ~ScratchRetirement();
  } retirement{this};
  /// Declared after the transport so it is destroyed first: its thread finishes before the
  /// transport goes.
  std::unique_ptr<comm::Executor> executor;
  /// The GPU path (device buffers over NCCL). Destroyed before the executor: its outstanding
  /// ops report their end to it.
  std::unique_ptr<gpu::DeviceBackend> gpu;

  comm::Group group() const noexcept { return {rank, size}; }

  /// The checks of a collective's options that need no other rank: its deadline and its forced
  /// algorithm (one of this collective's).
  static void check_options(const CollectiveOptions& options, Collective kind) {
    // Named only when there is a timeout to check: the name lookup showed in tiny ops.
    if (options.timeout) comm::check_timeout(collective_name(kind), options.timeout);
    algorithms::check_forced_algorithm(kind, options.algorithm);
  }

  /// What the executor needs besides the body. Everything decidable on this rank alone (the
  /// timeout, a forced algorithm of another collective) is refused here, on the caller's thread,
  /// before the op takes a sequence number, so a wrong argument leaves the communicator usable.
  template <class Args>
  comm::OpInfo info(const CollectiveOptions& options, const Args& args) const {
    const Collective kind = algorithms::collective_of(args);
    check_options(options, kind);
    comm::OpInfo result{kind, options.algorithm, options.timeout.value_or(default_timeout), nullptr,
                        comm::shape_of(args)};
    if (debug_detail) {
      auto fingerprint = std::make_shared<comm::Fingerprint>(comm::fingerprint_of(args));
      const Algorithm job_wide =
          algorithms::environment_algorithm_overrides()[static_cast<std::size_t>(
              algorithm_family(kind))];
      fingerprint->algorithm = options.algorithm != Algorithm::Auto ? options.algorithm : job_wide;
      result.fingerprint = std::move(fingerprint);
    }
    return result;
  }

  /// True when a validated collective moves nothing on any rank (algorithms::moves_nothing) and
  /// so returns without a number, a flight record or a message, as MPI's and NCCL's zero-count
  /// calls do: after the checks of its options every op gets, and throwing as any op would on a
  /// poisoned communicator. Whatever its buffers' device: a 0-element buffer may carry no data
  /// pointer, and then no device, so ranks could disagree about the path but not about the
  /// counts. Not under COHORT_DEBUG=detail, whose fingerprint exchange is how a rank passing a
  /// count of 0 against another's non-zero count is found out.
  template <class Args>
  bool skipped_as_empty(const CollectiveOptions& options, const Args& args) const {
    if (debug_detail || !algorithms::moves_nothing(args)) return false;
    const Collective kind = algorithms::collective_of(args);
    check_options(options, kind);
    executor->check_usable(kind);
    return true;
  }

  /// Runs a validated collective on the path its placement says: blocking.
  template <class Args>
  void run(const CollectiveOptions& options, const Args& args, comm::Placement where) {
    if (skipped_as_empty(options, args)) return;
    if (where.on_device()) {
      run_on_device(options, args, where, false, {});
    } else {
      run(options, args);
    }
  }

  /// As above, for a collective on `in` and `out`: when it fails, what it left in flight at the
  /// transport may still touch them, so their owners stay with the transport until it ended
  /// (Transport::retain_until_quiet), whatever the caller does with its Buffers.
  template <class Args>
  void run(const CollectiveOptions& options, const Args& args, comm::Placement where,
           const Buffer& in, const Buffer& out) {
    try {
      run(options, args, where);
    } catch (const Error& e) {
      if (!where.on_device()) retain_after(e, in, out);
      throw;
    }
  }

  /// After a blocking host op failed with `e`: the owners of its buffers go to the transport
  /// (Executor::retain_until_quiet) if it took a number, the only ops that can have posted
  /// anything (not a refusal, nor a poisoned communicator's fast failure).
  void retain_after(const Error& e, const Buffer& in, const Buffer& out = Buffer()) noexcept {
    if (e.context().sequence) executor->retain_until_quiet(in.owner(), out.owner());
  }

  /// Queues a validated collective on the path its placement says.
  template <class Args>
  Work submit(const CollectiveOptions& options, Args args, comm::Held held, comm::Placement where) {
    if (skipped_as_empty(options, args)) return Work(detail::finished_work());
    if (where.on_device()) return run_on_device(options, args, where, true, std::move(held.owners));
    return submit(options, std::move(args), std::move(held));
  }

  /// `op` as a COHORT_DEBUG=detail comparison alone (an op with an empty body): no algorithm runs,
  /// so its fingerprint names none, as every rank's does whatever path its buffers take (a forced
  /// or COHORT_ALGO one would differ from a device path's). `on_device`: the comparison before a
  /// device op, which a host-path peer's fingerprint must not match.
  static comm::OpInfo compared_only(comm::OpInfo op, bool on_device = false) {
    auto fingerprint = std::make_shared<comm::Fingerprint>(*op.fingerprint);
    fingerprint->algorithm = Algorithm::Auto;
    fingerprint->on_device = on_device;
    op.fingerprint = std::move(fingerprint);
    op.forced = Algorithm::Auto;
    return op;
  }

  /// The GPU path of a collective (comm/device_ops.hpp): refusals on this thread, then queued on
  /// its stream; blocking unless `async`.
  template <class Args>
  Work run_on_device(const CollectiveOptions& options, const Args& args, comm::Placement where,
                     bool async, std::vector<std::shared_ptr<void>> keepalive) {
    comm::OpInfo op = info(options, args);
    if (op.fingerprint && algorithms::moves_nothing(args)) {
      // Under COHORT_DEBUG=detail an op that moves nothing is the comparison alone, on every
      // path (see run()); before the device's own checks, which a host-path peer does not make.
      if (async)
        return executor->submit(compared_only(std::move(op)), [](const algorithms::OpContext&) {});
      executor->run(compared_only(std::move(op)), [](const algorithms::OpContext&) {});
      return Work(detail::finished_work());
    }
    const std::string_view name = collective_name(op.kind);
    std::optional<DType> dtype;
    std::optional<ReduceOp> reduce_op;
    if constexpr (requires { args.dtype; }) dtype = args.dtype;
    if constexpr (requires { args.op; }) reduce_op = args.op;
    if constexpr (std::is_same_v<Args, algorithms::AlltoallArgs>)
      comm::check_distinct_on_device(name, args);
    const gpu::DeviceBackend::Prepared prepared =
        gpu->prepare(name, where.cuda_device, dtype, reduce_op);
    if (op.fingerprint) {
      // COHORT_DEBUG=detail, after this rank's own refusals: the ranks' arguments are compared
      // over the host connections, as a host op's are, by a host op of its own number. A rank
      // whose arguments disagree (a count, a root, or host buffers where this one's are on the
      // device, so that it took the host path) meets this one there, and every rank throws
      // InvalidArgument naming it before anything is queued on a device. *_async ones too, so
      // that every rank's device op takes two numbers whichever form it called: under detail
      // they wait for their peers.
      executor->run(compared_only(op, true), [](const algorithms::OpContext&) {});
    }
    return comm::run_device_op(
        *executor, *gpu, std::move(op), prepared, options.stream, async,
        [&args](const gpu::Launch& l) { gpu::enqueue(l, args); }, std::move(keepalive));
  }

  /// Runs a validated collective to completion (inline when nothing is ahead of it). Under
  /// COHORT_DEBUG=detail an op that moves nothing (skipped_as_empty() lets it through to be
  /// compared) is the comparison alone: its algorithm could still exchange set-up messages with
  /// peers whose empty buffer took the device path, which compare and do nothing else.
  template <class Args>
  void run(const CollectiveOptions& options, const Args& args) {
    if (debug_detail && algorithms::moves_nothing(args)) {
      executor->run(compared_only(info(options, args)), [](const algorithms::OpContext&) {});
      return;
    }
    executor->run(info(options, args), [this, &args, forced = options.algorithm](
                                           const algorithms::OpContext& ctx) {
      executor->note_algorithm(algorithms::run_collective(ctx, staging, args, forced));
    });
  }

  /// Queues a validated collective; `held` keeps the buffers' owners until it ran, and tells
  /// the executor which sends and receives may pass it.
  template <class Args>
  Work submit(const CollectiveOptions& options, Args args, comm::Held held) {
    comm::OpInfo op = info(options, args);
    op.footprint = comm::used_part(held.footprint, args);
    if (debug_detail && algorithms::moves_nothing(args))  // as run() says
      return executor->submit(compared_only(std::move(op)), [](const algorithms::OpContext&) {});
    // The executor by its address, not through `executor`: the queue may be drained by the
    // progress thread while that unique_ptr is being destroyed.
    comm::Executor* const runner = executor.get();
    return executor->submit(
        std::move(op), [this, runner, args = std::move(args), forced = options.algorithm,
                        keepalive = std::move(held.owners)](const algorithms::OpContext& ctx) {
          runner->note_algorithm(algorithms::run_collective(ctx, staging, args, forced));
        });
  }
};

namespace comm {

/// Builds a Communicator around a fully wired Impl (its constructor is protected).
std::shared_ptr<Communicator> make_communicator(std::unique_ptr<Communicator::Impl> impl);

/// Where a new communicator's state comes from.
struct CommunicatorSetup {
  std::uint32_t id = 0;
  int rank = 0;
  int size = 1;
  int node_rank = 0;
  int local_size = 1;
  int host_ranks = 1;
  /// May it use a shared arena (false when its ranks span hosts)?
  bool arena_eligible = true;
  std::chrono::milliseconds default_timeout{0};
  /// A world's: when its wiring must be done (Communicator::create's one deadline, shared by
  /// every stage of connecting).
  std::chrono::steady_clock::time_point connect_deadline{};
  bool debug_detail = false;
  std::string job_id;  ///< the launcher's job id (may be empty), for flight record file names
};

/// A world: connects the transport through "cohort/comm/<id>" in `store` (collective over the
/// world's ranks).
std::unique_ptr<Communicator::Impl> wire_world(std::shared_ptr<Store> store,
                                               const CommunicatorSetup& setup);
/// A communicator over a subset of `parent`'s ranks (`members`, in new rank order) sharing the
/// parent's connections under tag id `tag`. Local: nothing is communicated.
std::unique_ptr<Communicator::Impl> derive_communicator(const Communicator::Impl& parent,
                                                        const CommunicatorSetup& setup,
                                                        std::span<const int> members,
                                                        transport::TagIdClaim tag,
                                                        std::optional<gpu::NcclChild> nccl);

/// A fresh job-wide communicator id (1, 2, ...; the first world is 0) from the store's counter.
std::uint32_t allocate_communicator_id(Store& store);
/// The leader allocates an id and publishes it under `key`; the others read it (waiting up to
/// `timeout`). Every caller returns the same id.
std::uint32_t agree_on_id(Store& store, const std::string& key, bool leader,
                          std::chrono::milliseconds timeout);

}  // namespace comm
}  // namespace cohort
