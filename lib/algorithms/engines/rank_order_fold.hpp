#pragma once

// Folding every rank's operand in rank order: dst = operand(0) op operand(1) op ... op
// operand(n - 1). Floating-point ops are not associative, so the shared-memory and single-copy
// reductions all fold this way: whichever rank reduces an element, and through whichever of
// them, every rank gets the same bits.

#include "reduce/reduce.hpp"

#include <cstddef>

namespace cohort::algorithms {

/// Whether a rank's own operand must be kept aside before the fold: in place it is `dst`, and
/// the fold's first step writes `dst` from ranks 0 and 1, so a rank from 2 on would find its own
/// operand overwritten before its turn. (Ranks 0 and 1 are read in that same first step.)
constexpr bool own_operand_needs_keeping(bool in_place, int rank) noexcept {
  return in_place && rank >= 2;
}

/// dst = operand(0) op ... op operand(n - 1), `count` elements, n >= 2. operand(r) is called once
/// per rank, in rank order, just before its use, so it may fill and return a scratch buffer (a
/// peer's part read on demand); what it returned for rank 0 must stay valid through the call for
/// rank 1. Operands may alias `dst` only for ranks 0 and 1 (see own_operand_needs_keeping).
template <class Operand>
void fold_in_rank_order(ReduceOp op, DType dtype, void* dst, std::size_t count, int n,
                        Operand&& operand) {
  if (count == 0) return;
  const void* first = operand(0);
  const void* second = operand(1);
  reduce::reduce_to(op, dtype, dst, first, second, count);
  for (int r = 2; r < n; ++r) reduce::reduce_into(op, dtype, dst, operand(r), count);
}

}  // namespace cohort::algorithms
