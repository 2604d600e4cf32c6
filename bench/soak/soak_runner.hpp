#pragma once

// Runs the soak plan on one rank: draws the steps (soak_plan), executes the ones involving this
// rank on the world, on split sub-communicators and on dups, checks every result (soak_op), and
// watches the process's resources between steps. With a KillPlan, the victim SIGKILLs itself at
// the planned op and every other rank must see the death as a cohort::Error.
//
// A run ends with one more world allreduce of the number of ops each rank took part in, which
// must equal the plan's count: no rank skipped or repeated an op. In a run with a kill it is
// also the op every survivor must fail on if nothing failed before.

#include "process_resources.hpp"

#include <cohort/communicator.hpp>
#include <cohort/error.hpp>

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace cohort::soak {

/// Growth of a rank's descriptor count over the random phase that is tolerated. The world's
/// connections and arena exist before the phase starts (the warm-up makes them) and every
/// sub-communicator is destroyed before a sample is taken, so a leak-free run grows by 0, which
/// is what every run measured (3-5 ranks, UCX 1.13, both peer-failure modes; a run after a kill
/// ends one lower, the dead peer's endpoint closed). The margin is for UCX transports that open
/// descriptors lazily; a leak of one per sub-communicator exceeds it within a few steps.
inline constexpr int kFdSlack = 2;
/// Growth of the thread count that is tolerated (measured: 0), a margin for UCX's lazily started
/// async thread.
inline constexpr int kThreadSlack = 1;

enum class KillMoment {
  BeforeOp,  ///< the victim dies instead of entering the op
  DuringOp,  ///< the victim starts the op async, gives it a few ms, then dies
};

struct KillPlan {
  int victim = 0;           ///< world rank that dies
  std::uint64_t at_op = 0;  ///< it dies at the first op it takes part in with index >= at_op
  KillMoment moment = KillMoment::BeforeOp;
};

/// The kill a seed picks for a world of `world_size` ranks and a plan of `ops` ops: a victim,
/// an op in the middle 80% of the plan, and before or during it.
KillPlan kill_for_seed(std::uint64_t seed, int world_size, std::uint64_t ops);

struct SoakOptions {
  std::uint64_t seed = 1;
  /// Ops to draw (the run finishes the step that reaches this count).
  std::uint64_t ops = 2000;
  /// Every op's deadline (the communicator's default, and passed explicitly on some ops).
  std::chrono::milliseconds timeout{std::chrono::seconds(30)};
  /// Largest element count an op draws.
  std::size_t max_count = 1u << 17;
  std::optional<KillPlan> kill;
};

/// How many of each kind of op this rank took part in.
struct OpMix {
  std::array<std::uint64_t, kCollectiveCount> collectives{};
  std::array<std::uint64_t, 14> dtypes{};
  std::array<std::uint64_t, 8> reduce_ops{};  // reducing collectives only
  std::uint64_t async = 0, in_place = 0, forced_algorithm = 0, misaligned = 0;
  std::uint64_t on_world = 0, on_split = 0, on_nested_split = 0, on_dup = 0;
  std::uint64_t splits = 0, nested_splits = 0, dups = 0;
  std::uint64_t elements = 0;  ///< sum of the ops' counts
};

/// The error a surviving rank failed with after the kill: of the ops that failed together (an
/// async batch), the earliest with an error of its own, rather than one refused because the
/// communicator was already poisoned.
struct FailureSeen {
  ErrorCode code = ErrorCode::Internal;
  std::string what;            ///< the Error's what()
  std::uint64_t op_index = 0;  ///< the op (or the next op, for a failed split or dup)
  std::string op;              ///< the op's description and communicator
  /// Other ops of the same batch that failed with it ("op #59 invalid_usage").
  std::vector<std::string> others;
  std::int64_t detected_ns = 0;  ///< steady_clock (CLOCK_MONOTONIC) time it was caught
  /// The failed communicator's next op (a barrier): its error code, or none when it succeeded,
  /// and how long it took to fail.
  std::optional<ErrorCode> followup_code;
  std::chrono::milliseconds followup_time{0};
};

struct RankOutcome {
  std::uint64_t ops_planned = 0;   ///< ops the plan drew (all groups)
  std::uint64_t ops_executed = 0;  ///< ops this rank took part in
  OpMix mix;
  std::optional<FailureSeen> failure;
  ProcessResources baseline;  ///< after the warm-up
  ProcessResources peak;      ///< largest of each count between steps
  ProcessResources end;       ///< after the last step
  double seconds = 0;
};

/// Called after each step with the ops drawn so far and this rank's outcome so far.
using ProgressFn = std::function<void(const RankOutcome&)>;

/// A wrong result, a leak, or a cohort::Error where none was expected. The message names the op,
/// its communicator, the seed, and what was wrong.
class SoakFailure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Runs the soak on `world` (all of whose ranks must call it with the same options). Returns when
/// the plan is done or, on a survivor of a planned kill, at the first error. Throws SoakFailure
/// for anything wrong; the victim never returns.
RankOutcome run_soak(const std::shared_ptr<Communicator>& world, const SoakOptions& options,
                     const ProgressFn& progress = {});

}  // namespace cohort::soak
