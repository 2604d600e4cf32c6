// run_collective: normalise, choose, run the first algorithm that accepts, finish.

#include "algorithms/dispatch.hpp"

#include <cohort/error.hpp>

#include "algorithms/announcement.hpp"
#include "algorithms/descriptor.hpp"
#include "algorithms/engines/shared_memory_reduction.hpp"
#include "algorithms/measured_choice.hpp"
#include "algorithms/normalise.hpp"
#include "algorithms/selection.hpp"
#include "core/log.hpp"
#include "core/mappable_memory.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <string>
#include <type_traits>

namespace cohort::algorithms {
namespace {

const AlgorithmDescriptor& descriptor_of(Collective family, Algorithm algorithm) {
  const AlgorithmDescriptor* descriptor = find_algorithm(family, algorithm);
  if (descriptor == nullptr)
    throw Error(ErrorCode::Internal, std::string(algorithm_name(algorithm)) + " is listed for " +
                                         std::string(collective_name(family)) +
                                         " but has no descriptor");
  return *descriptor;
}

/// Runs an algorithm that accepted `args`.
template <class Args>
void run_accepted(const OpContext& ctx, const Args& args, std::size_t bytes, Algorithm algorithm,
                  const AlgorithmDescriptor& descriptor) {
  try {
    // On the shared arena every flag this op publishes carries what it is, so a rank that
    // disagrees about it (or runs it by the other arena algorithm) fails, on every rank,
    // instead of reading or writing a wrong extent.
    if ((algorithm == Algorithm::SharedMemory || algorithm == Algorithm::SingleCopy) &&
        ctx.size > 1)
      if (transport::SharedArena* arena = ctx.arena())
        arena->begin_op(announcement_of(args, bytes, algorithm), &describe_announcement);
    descriptor.run(ctx, &args);
  } catch (const Error& e) {
    // The error names the algorithm that was running; the string is built only on failure.
    throw e.with_context(ErrorContext{.algorithm = std::string(algorithm_name(algorithm))});
  }
  COHORT_LOG_DEBUG("{}: {} bytes on {} ranks ran {}", ctx.what, bytes, ctx.size,
                   algorithm_name(algorithm));
}

/// Whether this rank's buffers of an op the measured choice times are mappable: the ones a
/// single-copy run works on in place (an allreduce's input and output, a reduce's input and the
/// root's output, a reduce_scatter's input).
bool buffers_mappable(const OpContext&, const AllreduceArgs& args, std::size_t bytes) {
  MappableRef ref;
  return find_mappable(args.in, bytes, &ref) && find_mappable(args.out, bytes, &ref);
}

bool buffers_mappable(const OpContext& ctx, const ReduceArgs& args, std::size_t bytes) {
  MappableRef ref;
  return find_mappable(args.in, bytes, &ref) &&
         (ctx.rank != args.root || find_mappable(args.out, bytes, &ref));
}

bool buffers_mappable(const OpContext&, const ReduceScatterArgs& args, std::size_t bytes) {
  MappableRef ref;
  return find_mappable(args.in, bytes, &ref);
}

/// The data movers' classes decide by time alone (MeasuredChoice::SmallClass::AnyMemory): their
/// buffers' kind is never asked.
template <class Args>
bool buffers_mappable(const OpContext&, const Args&, std::size_t) {
  return false;
}

/// The reductions, whose classes below MeasuredChoice::kAnyMemoryClassBytes take single copy
/// over mappable memory only.
template <class Args>
constexpr bool kReduction =
    std::is_same_v<Args, AllreduceArgs> || std::is_same_v<Args, ReduceArgs> ||
    std::is_same_v<Args, ReduceScatterArgs>;

/// Which of the two a measurement sets against each other the table runs (its "table" side),
/// or Auto where none is measured: a reduction's where the table runs the arena first; a data
/// mover's where it runs either first and lists the other (a row without the arena left it out
/// on purpose).
template <class Args>
Algorithm measured_table_side(const Candidates& candidates) {
  if (candidates.empty()) return Algorithm::Auto;
  const Algorithm first = *candidates.begin();
  if (first == Algorithm::SharedMemory) return first;
  if constexpr (!kReduction<Args>) {
    if (first == Algorithm::SingleCopy && std::find(candidates.begin(), candidates.end(),
                                                    Algorithm::SharedMemory) != candidates.end())
      return first;
  }
  return Algorithm::Auto;
}

/// A large allreduce, reduce or reduce_scatter on one host where the table runs the arena, or a
/// broadcast, scatter or uniform alltoall on three ranks or more where it runs the arena or
/// single copy: the arena or single copy, whichever the communicator measured faster
/// (measured_choice.hpp). Returns Auto, having run nothing, where no measurement applies.
template <class Args>
Algorithm run_measured(const OpContext& ctx, const Args& args, std::size_t bytes,
                       const Candidates& candidates, Algorithm forced) {
  constexpr Collective kFamily = kFamilyOf<Args>;
  const Algorithm table = measured_table_side<Args>(candidates);
  if (ctx.choices == nullptr || ctx.size < 2 || table == Algorithm::Auto) return Algorithm::Auto;
  MeasuredChoice* measured = ctx.choices->measured(kFamily, bytes, ctx.size, forced);
  if (measured == nullptr) return Algorithm::Auto;
  const Algorithm other =
      table == Algorithm::SharedMemory ? Algorithm::SingleCopy : Algorithm::SharedMemory;
  const AlgorithmDescriptor& arena = descriptor_of(kFamily, Algorithm::SharedMemory);
  const AlgorithmDescriptor& single = descriptor_of(kFamily, Algorithm::SingleCopy);
  // The same on every rank: one host, the arena's single-copy check, and its agreement that
  // every rank allows the measurement (COHORT_MEASURED_CHOICE).
  if (!arena.accepts(ctx, &args) || !single.accepts(ctx, &args) || !ctx.arena()->measured_choice())
    return Algorithm::Auto;
  if (measured->vote_due()) {
    // Every rank is at the same call of this size class: agree on the slowest rank's times.
    const std::array<double, 3> mine = measured->vote();
    std::array<double, 3> slowest{};
    const AllreduceArgs vote{mine.data(), slowest.data(), mine.size(), DType::Float64,
                             ReduceOp::Max};
    try {
      ctx.arena()->begin_op(vote_announcement(), &describe_announcement);
      shared_memory_reduction(ctx, vote.in, vote.out, vote.count, vote.dtype, vote.op);
    } catch (const Error& e) {
      throw e.with_context(ErrorContext{.algorithm = "shared_memory (measured choice's vote)"});
    }
    measured->decide(slowest);
    COHORT_LOG_DEBUG(
        "{}: measured choice for {} bytes: {} (table's) {:.3g} s/GB, {} {:.3g} s/GB "
        "(slowest rank's best), {} buffers; runs {}",
        ctx.what, bytes, algorithm_name(table), slowest[0] * 1e9, algorithm_name(other),
        slowest[1] * 1e9,
        !kReduction<Args>   ? "any (not asked)"
        : slowest[2] == 0.0 ? "mappable"
                            : "ordinary",
        algorithm_name(measured->chosen() == MeasuredChoice::kAlternative ? other : table));
  }
  const Algorithm algorithm = measured->next() == MeasuredChoice::kAlternative ? other : table;
  const auto start = std::chrono::steady_clock::now();
  run_accepted(ctx, args, bytes, algorithm, algorithm == Algorithm::SingleCopy ? single : arena);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // Whether this rank's buffers are mappable: only a reduction's class below 2 MiB asks
  // (measured_choice.hpp), but every trial call looks, which costs a lookup per trial. `bytes`
  // is a reduce_scatter's whole input.
  const bool mappable = measured->in_trials() && buffers_mappable(ctx, args, bytes);
  // Per byte: calls of different sizes share a size class.
  measured->record(seconds / static_cast<double>(bytes), mappable);
  return algorithm;
}

/// Tries the candidates in order; returns the one that ran. `args` are already normalised.
template <class Args>
Algorithm run_first_accepting(const OpContext& ctx, const Args& args, Algorithm forced) {
  const Collective family = kFamilyOf<Args>;
  const std::size_t bytes = selection_bytes(args, ctx.size);
  const Candidates candidates =
      ctx.choices != nullptr
          ? ctx.choices->candidates(family, bytes, ctx.size, forced)
          : select_candidates(family, bytes, ctx.size, forced, environment_algorithm_overrides());
  if constexpr (kReduction<Args> || std::is_same_v<Args, BroadcastArgs> ||
                std::is_same_v<Args, ScatterArgs> || std::is_same_v<Args, AlltoallArgs>) {
    if (bytes >= kMeasuredChoiceMinBytes)
      if (const Algorithm ran = run_measured(ctx, args, bytes, candidates, forced);
          ran != Algorithm::Auto)
        return ran;
  }
  for (Algorithm algorithm : candidates) {
    const AlgorithmDescriptor& descriptor = descriptor_of(family, algorithm);
    try {
      if (!descriptor.accepts(ctx, &args)) {
        COHORT_LOG_DEBUG("{}: {} declined {} bytes on {} ranks", ctx.what,
                         algorithm_name(algorithm), bytes, ctx.size);
        continue;
      }
    } catch (const Error& e) {
      throw e.with_context(ErrorContext{.algorithm = std::string(algorithm_name(algorithm))});
    }
    run_accepted(ctx, args, bytes, algorithm, descriptor);
    return algorithm;
  }
  throw Error(ErrorCode::Internal,
              "every candidate algorithm declined " + std::to_string(bytes) + " bytes on " +
                  std::to_string(ctx.size) + " ranks",
              ErrorContext{.op = ctx.what});
}

std::size_t total_bytes(std::size_t elements, DType dtype) {
  return elements * dtype_size(dtype);
}

}  // namespace

template <>
std::size_t selection_bytes(const AllreduceArgs& a, int) {
  return total_bytes(a.count, a.dtype);
}
template <>
std::size_t selection_bytes(const BroadcastArgs& a, int) {
  return total_bytes(a.count, a.dtype);
}
template <>
std::size_t selection_bytes(const ReduceArgs& a, int) {
  return total_bytes(a.count, a.dtype);
}
template <>
std::size_t selection_bytes(const AllgatherArgs& a, int) {
  return total_bytes(a.total, a.dtype);
}
template <>
std::size_t selection_bytes(const GatherArgs& a, int) {
  return total_bytes(a.total, a.dtype);
}
template <>
std::size_t selection_bytes(const ScatterArgs& a, int) {
  return total_bytes(a.total, a.dtype);
}
template <>
std::size_t selection_bytes(const ReduceScatterArgs& a, int world_size) {
  return static_cast<std::size_t>(world_size) * total_bytes(a.count, a.dtype);
}
template <>
std::size_t selection_bytes(const AlltoallArgs& a, int) {
  // alltoallv counts differ per rank: they must not steer a choice every rank has to agree on.
  return a.uniform ? total_bytes(a.send_total, a.dtype) : kUnknownBytes;
}
template <>
std::size_t selection_bytes(const BarrierArgs&, int) {
  return 0;
}

template <class Args>
Algorithm run_collective(const OpContext& ctx, ScratchPool& staging, const Args& args,
                         Algorithm forced) {
  Normalised<Args> normalised(ctx, staging, args);
  const Algorithm ran = run_first_accepting(ctx, normalised.args(), forced);
  finish(ctx, args, ran);
  return ran;
}

template Algorithm run_collective(const OpContext&, ScratchPool&, const AllreduceArgs&, Algorithm);
template Algorithm run_collective(const OpContext&, ScratchPool&, const BroadcastArgs&, Algorithm);
template Algorithm run_collective(const OpContext&, ScratchPool&, const ReduceArgs&, Algorithm);
template Algorithm run_collective(const OpContext&, ScratchPool&, const AllgatherArgs&, Algorithm);
template Algorithm run_collective(const OpContext&, ScratchPool&, const GatherArgs&, Algorithm);
template Algorithm run_collective(const OpContext&, ScratchPool&, const ScatterArgs&, Algorithm);
template Algorithm run_collective(const OpContext&, ScratchPool&, const ReduceScatterArgs&,
                                  Algorithm);
template Algorithm run_collective(const OpContext&, ScratchPool&, const AlltoallArgs&, Algorithm);
template Algorithm run_collective(const OpContext&, ScratchPool&, const BarrierArgs&, Algorithm);

}  // namespace cohort::algorithms
