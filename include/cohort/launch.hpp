#pragma once

/// Running a function in several local processes, as cohort-run does for programs: each child
/// gets a full Environment (and the COHORT_* / torchrun variables), the parent hosts the store.

#include <cohort/environment.hpp>

#include <chrono>
#include <functional>

namespace cohort {

struct LaunchOptions {
  /// After the first failure, how long other ranks get between SIGTERM and SIGKILL.
  std::chrono::milliseconds grace{std::chrono::seconds(10)};
  /// Fails the whole launch (killing every rank) after this long; zero means no limit.
  std::chrono::milliseconds timeout{0};
};

/// Forks `world_size` children; child r calls fn(env) with env.rank == r and exits 0 when it
/// returns, 1 when it throws (the exception's message on stderr). Returns when all exited 0.
/// When one fails, the others are stopped and Error(RemoteError) names the failing rank, its
/// exit code or signal. Call it from a single-threaded parent (fork).
void launch(int world_size, const std::function<void(const Environment&)>& fn,
            const LaunchOptions& options = {});

}  // namespace cohort
