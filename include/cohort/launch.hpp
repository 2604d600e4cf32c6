#pragma once

/// Running a function in several local processes, as cohort-run does for programs: each child
/// gets a full Environment (and the COHORT_* / torchrun variables, MASTER_PORT a port for
/// torch.distributed's own store as cohort-run gives it), the parent hosts the store.
///
/// The options follow ml-starter's launch_subprocesses (ml.utils.torch_distributed): child i is
/// rank `i + rank_offset`, its local rank is `rank % local_world_size`, and a per-rank `setup`
/// runs in the child before the rank's function. Where cohort deliberately differs:
/// - ml-starter forks `world_size` children even with an offset, so an offset pushes ranks past
///   the world size it gives them. Here an offset only exists within a larger job (`join`): the
///   children are ranks [rank_offset, rank_offset + num_ranks) of join->world_size ranks, and they
///   meet the others in that job's store. Without `join` the launch is the whole job.
/// - ml-starter runs a world of one inline in the caller; cohort always forks, so a rank that
///   crashes or calls exit() never takes the caller with it, and the caller's state never leaks
///   into the rank.

#include <cohort/environment.hpp>
#include <cohort/work.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace cohort {

/// A job that someone else hosts (another launch(), cohort-run, or a store the caller started),
/// for a launch that starts only some of its ranks.
struct JoinedJob {
  /// Ranks in the whole job.
  int world_size = 0;
  /// The job's store: the children connect to it instead of one this launch would host.
  std::string store_addr;
  std::uint16_t store_port = 0;
  std::string token;
};

struct LaunchOptions {
  /// After the first failure, how long other ranks get between SIGTERM and SIGKILL. A rank
  /// still not reapable 10 s after SIGKILL (asleep in the kernel, or held by a tracer) is left
  /// behind, with a warning naming its pid, and counts as killed by SIGKILL; a helper thread
  /// reaps it when it finally dies, so it does not stay a zombie of the calling process.
  std::chrono::milliseconds grace{std::chrono::seconds(10)};
  /// Fails the whole launch (killing every rank) after this long; zero means no limit.
  std::chrono::milliseconds timeout{0};
  /// Rank of this launch's first child (ml-starter's rank_offset): child i is rank
  /// rank_offset + i. Non-zero only together with `join`, since the ranks below it must be started
  /// by someone who shares the job's store.
  int rank_offset = 0;
  /// Ranks per node (ml-starter's local_world_size): rank r gets local rank r % local_world_size
  /// and node r / local_world_size; the job spans ceil(world / local_world_size) nodes, the last
  /// one possibly partial (as cohort::resolve_environment derives it). 0: the whole job is one
  /// node. Several "nodes" on one host are how tests exercise per-node behaviour (local main,
  /// per-node printing); ranks on different nodes do not share memory segments.
  int local_world_size = 0;
  /// Runs in each child before fn (ml-starter's `setup`), with the rank's Environment, after the
  /// rank variables are exported: the place for per-rank process setup that must precede
  /// cohort::init() (pinning to cores, choosing a GPU by local rank, setting UCX_* variables).
  /// If it throws, fn does not run and the rank fails with "rank <r>: setup failed: <what>" on
  /// its stderr, which launch() reports like any failing rank.
  std::function<void(const Environment&)> setup;
  /// Start ranks of a larger job instead of hosting a job of num_ranks ranks (see JoinedJob).
  std::optional<JoinedJob> join;
};

/// Forks `num_ranks` children; child i calls setup(env) (when set), then fn(env), with
/// env.rank == rank_offset + i, and exits 0 when fn returns, 1 when setup or fn throws (the
/// exception's message on stderr, prefixed with the rank). Returns when all exited 0. When one
/// fails, the others are stopped and Error(RemoteError) names the failing rank, its exit code or
/// signal and its last stderr lines. Call it from a single-threaded process (fork); the helper
/// threads cohort starts itself (a reaper of ranks left behind, blocked in waitpid; a name
/// lookup) hold no locks a forked child could need, and do not count.
///
/// Without options.join the parent hosts the job's store on loopback and the children are the
/// whole job (ranks 0 .. num_ranks-1). With it, no store is hosted here, the children use the
/// joined job's, and a failure on the ranks started elsewhere is not seen by this launch (it
/// surfaces in the children's own collectives, bounded by their timeouts, or by options.timeout).
///
/// Throws Error(InvalidArgument) before forking for num_ranks < 1, an empty fn, a grace or
/// timeout that is negative or above kMaxTimeout (one year), a negative rank_offset or
/// local_world_size, a local_world_size above the job's world size, a rank_offset without `join`,
/// ranks beyond join->world_size, or a `join` without a store address and port.
void launch(int num_ranks, const std::function<void(const Environment&)>& fn,
            const LaunchOptions& options = {});

}  // namespace cohort
