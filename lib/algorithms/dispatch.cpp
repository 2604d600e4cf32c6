// run_collective: normalise, choose, run the first algorithm that accepts, finish.

#include "algorithms/dispatch.hpp"

#include <cohort/error.hpp>

#include "algorithms/announcement.hpp"
#include "algorithms/descriptor.hpp"
#include "algorithms/normalise.hpp"
#include "algorithms/selection.hpp"
#include "core/log.hpp"

#include <string>

namespace cohort::algorithms {
namespace {

/// Tries the candidates in order; returns the one that ran. `args` are already normalised.
template <class Args>
Algorithm run_first_accepting(const OpContext& ctx, const Args& args, Algorithm forced) {
  const Collective family = kFamilyOf<Args>;
  const std::size_t bytes = selection_bytes(args, ctx.size);
  const Candidates candidates =
      ctx.choices != nullptr
          ? ctx.choices->candidates(family, bytes, ctx.size, forced)
          : select_candidates(family, bytes, ctx.size, forced, environment_algorithm_overrides());
  for (Algorithm algorithm : candidates) {
    const AlgorithmDescriptor* descriptor = find_algorithm(family, algorithm);
    if (descriptor == nullptr)
      throw Error(ErrorCode::Internal, std::string(algorithm_name(algorithm)) + " is listed for " +
                                           std::string(collective_name(family)) +
                                           " but has no descriptor");
    try {
      if (!descriptor->accepts(ctx, &args)) {
        COHORT_LOG_DEBUG("{}: {} declined {} bytes on {} ranks", ctx.what,
                         algorithm_name(algorithm), bytes, ctx.size);
        continue;
      }
      // On the shared arena every flag this op publishes carries what it is, so a rank that
      // disagrees about it (or runs it by the other arena algorithm) fails, on every rank,
      // instead of reading or writing a wrong extent.
      if ((algorithm == Algorithm::SharedMemory || algorithm == Algorithm::SingleCopy) &&
          ctx.size > 1)
        if (transport::SharedArena* arena = ctx.arena())
          arena->begin_op(announcement_of(args, bytes, algorithm), &describe_announcement);
      descriptor->run(ctx, &args);
    } catch (const Error& e) {
      // The error names the algorithm that was running; the string is built only on failure.
      throw e.with_context(ErrorContext{.algorithm = std::string(algorithm_name(algorithm))});
    }
    COHORT_LOG_DEBUG("{}: {} bytes on {} ranks ran {}", ctx.what, bytes, ctx.size,
                     algorithm_name(algorithm));
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
