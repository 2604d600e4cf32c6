#pragma once

// In-place forms, normalised before any algorithm runs and finished after (args.hpp lists what
// algorithms may then assume). Kept apart from the algorithms so each of them handles one shape
// of arguments, and apart from the communicator so the rules sit beside the Args they describe.
//
//   reduce          Avg travels as Sum; an input overlapping the root's output only in part
//                   is staged (in place, in == out, is each algorithm's to take)
//   allgather       this rank copies its input into its block of out (unless it is there)
//   gather          the root copies its input into its block of out (unless it is there)
//   reduce_scatter  Avg travels as Sum
//   (allreduce, reduce and reduce_scatter: Avg on f16/bf16/fp8 is pre-divided, see below)
//   alltoall        an input overlapping the output is staged (in place proper, without the
//                   own block, which stays where it is)
// and finish() divides Avg's sums where the algorithm did not (every algorithm but the
// shared-memory allreduce, which divides while the sums are in cache).

#include <cohort/algorithm.hpp>

#include "algorithms/args.hpp"
#include "algorithms/op_context.hpp"

#include <optional>

namespace cohort::algorithms {

/// The normalised arguments of one op: `args` itself, or a modified copy of it.
template <class Args>
class Normalised {
 public:
  Normalised(const OpContext& ctx, ScratchPool& staging, const Args& args);
  const Args& args() const noexcept { return copy_ ? *copy_ : original_; }

 private:
  const Args& original_;
  std::optional<Args> copy_;
};

/// Avg on f16, bf16 and fp8 divides each contribution by the number of ranks before the sum (a
/// staged copy of the input; the op then travels as Sum and nothing is left to finish): their sum
/// overflows long before their mean does. Other dtypes divide the sum at the end.
bool premultiplies_avg(ReduceOp op, DType dtype) noexcept;

/// After the algorithm `ran`: Avg's division where it is still owed.
void finish(const OpContext& ctx, const AllreduceArgs& args, Algorithm ran);
void finish(const OpContext& ctx, const ReduceArgs& args, Algorithm ran);
void finish(const OpContext& ctx, const ReduceScatterArgs& args, Algorithm ran);
/// Every other collective has nothing to finish.
template <class Args>
void finish(const OpContext&, const Args&, Algorithm) {}

}  // namespace cohort::algorithms
