#pragma once

// The fold that lets power-of-two allreduce algorithms (recursive doubling, Rabenseifner) run on
// any world size (patterns/power_of_two_fold.hpp): each "extra" rank hands its whole vector to
// its partner before the power-of-two phase and gets the result back after it. Both algorithms
// share these two steps and their tags.

#include "algorithms/args.hpp"
#include "algorithms/op_context.hpp"
#include "patterns/power_of_two_fold.hpp"

#include <cstddef>
#include <cstdint>

namespace cohort::algorithms {

/// Steps used by the fold; the power-of-two phase numbers its rounds from kFoldFirstRoundStep.
inline constexpr std::uint32_t kFoldStep = 0;
inline constexpr std::uint32_t kUnfoldStep = 1;
inline constexpr std::uint32_t kFoldFirstRoundStep = 2;

/// Before the power-of-two phase. An extra rank sends its input, receives the final result into
/// `out`, and gets nullptr back: it is done. A partner receives its extra rank's vector into
/// `incoming` and reduces it in (out = in op incoming) and gets `out`; every other rank gets
/// `in`. The returned pointer is where this rank's running reduction lives.
const std::byte* allreduce_fold_in(const OpContext& ctx, const AllreduceArgs& args,
                                   const patterns::FoldPosition& fold, std::byte* incoming);

/// After the power-of-two phase: a partner sends the finished result back to its extra rank.
void allreduce_unfold(const OpContext& ctx, const AllreduceArgs& args,
                      const patterns::FoldPosition& fold);

}  // namespace cohort::algorithms
