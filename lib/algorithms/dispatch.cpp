// run_collective: normalise, choose, run the first algorithm that accepts, finish.

#include "algorithms/dispatch.hpp"

#include <cohort/error.hpp>

#include "algorithms/announcement.hpp"
#include "algorithms/descriptor.hpp"
#include "algorithms/engines/arena_rounds.hpp"
#include "algorithms/engines/own_block.hpp"
#include "algorithms/engines/shared_memory_reduction.hpp"
#include "algorithms/measured_choice.hpp"
#include "algorithms/normalise.hpp"
#include "algorithms/selection.hpp"
#include "core/log.hpp"
#include "core/mappable_memory.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <optional>
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

/// Runs an algorithm that accepted `args`; on the arena it announces `announcement` (nullopt:
/// announcement_of's).
template <class Args>
void run_accepted(const OpContext& ctx, const Args& args, std::size_t bytes, Algorithm algorithm,
                  const AlgorithmDescriptor& descriptor,
                  std::optional<std::uint64_t> announcement = std::nullopt) {
  try {
    // On the shared arena every flag this op publishes carries what it is, so a rank that
    // disagrees about it (or runs it by the other arena algorithm) fails, on every rank,
    // instead of reading or writing a wrong extent.
    if ((algorithm == Algorithm::SharedMemory || algorithm == Algorithm::SingleCopy) &&
        ctx.size > 1)
      if (transport::SharedArena* arena = ctx.arena())
        arena->begin_op(announcement.value_or(announcement_of(args, bytes, algorithm)),
                        &describe_announcement);
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

/// The rooted movers whose in-place and out-of-place calls are measured apart (CallForm): only
/// the root knows the form, and the others learn it from its first flag (follow_root).
template <class Args>
constexpr bool kRootLed = std::is_same_v<Args, BroadcastArgs> ||
                          std::is_same_v<Args, ScatterArgs> || std::is_same_v<Args, GatherArgs>;

/// The root's form of the call: its own block already where it belongs.
CallForm root_form(const BroadcastArgs& args) {
  return args.in == args.out ? CallForm::InPlace : CallForm::OutOfPlace;
}

template <class Args>
requires std::is_same_v<Args, ScatterArgs> || std::is_same_v<Args, GatherArgs> CallForm
root_form(const Args& args) {
  return OwnBlock::of(args).in_place() ? CallForm::InPlace : CallForm::OutOfPlace;
}

/// Whether both algorithms' first step is the root's flag in the arena's main numbering, which
/// the others can wait for to learn the form: a vector past the eager lines (broadcast), other
/// ranks' blocks past them (scatter: the arena sends at most kEagerBytes of them through the
/// root's eager line, whose writer may run ahead of its readers), or some other rank's block
/// past them (gather: below, each goes through its owner's eager line).
bool root_flag_comes_first(const BroadcastArgs& args) {
  return args.count * dtype_size(args.dtype) > transport::SharedArena::kEagerBytes;
}

bool root_flag_comes_first(const ScatterArgs& args) {
  return packed_before(args.counts, dtype_size(args.dtype), static_cast<std::size_t>(args.root),
                       args.counts.size()) > transport::SharedArena::kEagerBytes;
}

bool root_flag_comes_first(const GatherArgs& args) {
  return rounds_for_others(args.counts, dtype_size(args.dtype), static_cast<std::size_t>(args.root),
                           transport::SharedArena::kEagerBytes) > 1;
}

/// One measured call: its class, the algorithm it runs, and what it announces on the arena.
struct MeasuredCall {
  MeasuredChoice* measured = nullptr;
  Algorithm algorithm = Algorithm::Auto;
  std::optional<std::uint64_t> announcement;
};

/// A rooted mover's measured call. The root takes its form's class and announces the form with
/// its algorithm's first flag. The others wait for that flag, take the class and the algorithm
/// from what it announces, and run that: every rank then records the call into the same class,
/// so their votes pair up. A broadcast's or scatter's others wait for that flag first in either
/// algorithm anyway; a gather's would otherwise start writing without the root, which is why
/// gathers are measured only where that head start is a small part of the call
/// (kGatherMeasuredMinBytes).
template <class Args>
MeasuredCall follow_root(const OpContext& ctx, const Args& args, std::size_t bytes, Algorithm table,
                         Algorithm other, Algorithm forced) {
  constexpr Collective kFamily = kFamilyOf<Args>;
  MeasuredCall call;
  if (ctx.rank == args.root) {
    const CallForm form = root_form(args);
    call.measured = ctx.choices->measured(kFamily, bytes, ctx.size, forced, form);
    call.algorithm = call.measured->next() == MeasuredChoice::kAlternative ? other : table;
    call.announcement = announcement_of(args, bytes, call.algorithm, form);
    return call;
  }
  const std::array<std::uint64_t, 4> accepted{
      announcement_of(args, bytes, table, CallForm::OutOfPlace),
      announcement_of(args, bytes, other, CallForm::OutOfPlace),
      announcement_of(args, bytes, table, CallForm::InPlace),
      announcement_of(args, bytes, other, CallForm::InPlace)};
  transport::SharedArena& arena = *ctx.arena();
  arena.begin_op(accepted[0], &describe_announcement);
  std::uint64_t theirs = 0;
  try {
    theirs =
        arena.wait_for_one_of(args.root, arena.generation() + 1, accepted, ctx.deadline, ctx.what);
  } catch (const Error& e) {
    throw e.with_context(ErrorContext{.algorithm = "measured choice (the root's form)"});
  }
  call.measured = ctx.choices->measured(kFamily, bytes, ctx.size, forced, announced_form(theirs));
  call.algorithm = announced_algorithm(theirs);
  call.announcement = theirs;
  return call;
}

/// Every rank is past the same call of this size class, its last trial: agree on the slowest
/// rank's times, and so on which algorithm runs the class from now on.
template <class Args>
void vote(const OpContext& ctx, MeasuredChoice& measured, std::size_t bytes, Algorithm table,
          Algorithm other) {
  const std::array<double, 3> mine = measured.vote();
  std::array<double, 3> slowest{};
  const AllreduceArgs ballot{mine.data(), slowest.data(), mine.size(), DType::Float64,
                             ReduceOp::Max};
  try {
    ctx.arena()->begin_op(vote_announcement(), &describe_announcement);
    shared_memory_reduction(ctx, ballot.in, ballot.out, ballot.count, ballot.dtype, ballot.op);
  } catch (const Error& e) {
    throw e.with_context(ErrorContext{.algorithm = "shared_memory (measured choice's vote)"});
  }
  measured.decide(slowest);
  COHORT_LOG_DEBUG(
      "{}: measured choice for {} bytes: {} (table's) {:.3g} s/GB, {} {:.3g} s/GB "
      "(slowest rank's best), {} buffers; runs {}",
      ctx.what, bytes, algorithm_name(table), slowest[0] * 1e9, algorithm_name(other),
      slowest[1] * 1e9,
      !kReduction<Args>   ? "any (not asked)"
      : slowest[2] == 0.0 ? "mappable"
                          : "ordinary",
      algorithm_name(measured.chosen() == MeasuredChoice::kAlternative ? other : table));
}

/// A large allreduce, reduce or reduce_scatter on one host where the table runs the arena, or a
/// large broadcast, scatter or gather (each form apart), or uniform alltoall on three ranks or
/// more, where it runs the arena or single copy: the arena or single copy, whichever the
/// communicator measured faster (measured_choice.hpp). Returns Auto, having run nothing, where no
/// measurement applies.
template <class Args>
Algorithm run_measured(const OpContext& ctx, const Args& args, std::size_t bytes,
                       const Candidates& candidates, Algorithm forced) {
  constexpr Collective kFamily = kFamilyOf<Args>;
  const Algorithm table = measured_table_side<Args>(candidates);
  if (ctx.choices == nullptr || ctx.size < 2 || table == Algorithm::Auto) return Algorithm::Auto;
  // Whether a class applies never depends on the form.
  if (ctx.choices->measured(kFamily, bytes, ctx.size, forced) == nullptr) return Algorithm::Auto;
  const Algorithm other =
      table == Algorithm::SharedMemory ? Algorithm::SingleCopy : Algorithm::SharedMemory;
  const AlgorithmDescriptor& arena = descriptor_of(kFamily, Algorithm::SharedMemory);
  const AlgorithmDescriptor& single = descriptor_of(kFamily, Algorithm::SingleCopy);
  // The same on every rank: one host, the arena's single-copy check, and its agreement that
  // every rank allows the measurement (COHORT_MEASURED_CHOICE).
  if (!arena.accepts(ctx, &args) || !single.accepts(ctx, &args) || !ctx.arena()->measured_choice())
    return Algorithm::Auto;
  const auto start = std::chrono::steady_clock::now();
  MeasuredCall call;
  if constexpr (kRootLed<Args>) {
    if (!root_flag_comes_first(args)) return Algorithm::Auto;
    call = follow_root(ctx, args, bytes, table, other, forced);
  } else {
    call.measured = ctx.choices->measured(kFamily, bytes, ctx.size, forced);
    call.algorithm = call.measured->next() == MeasuredChoice::kAlternative ? other : table;
  }
  run_accepted(ctx, args, bytes, call.algorithm,
               call.algorithm == Algorithm::SingleCopy ? single : arena, call.announcement);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // Whether this rank's buffers are mappable: only a reduction's class below 2 MiB asks
  // (measured_choice.hpp), but every trial call looks, which costs a lookup per trial. `bytes`
  // is a reduce_scatter's whole input.
  const bool mappable = call.measured->in_trials() && buffers_mappable(ctx, args, bytes);
  // Per byte: calls of different sizes share a size class.
  call.measured->record(seconds / static_cast<double>(bytes), mappable);
  if (call.measured->vote_due()) vote<Args>(ctx, *call.measured, bytes, table, other);
  return call.algorithm;
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
  if constexpr (kReduction<Args> || kRootLed<Args> || std::is_same_v<Args, AlltoallArgs>) {
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
