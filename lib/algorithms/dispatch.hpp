#pragma once

// The one path from validated arguments to an algorithm. run_collective() normalises the
// in-place forms (what args.hpp promises algorithms), picks candidates — the op's forced choice,
// else COHORT_ALGO, else the selection table keyed by (bytes, world size) — skips any whose
// accepts() declines, runs the first that accepts, finishes the op (Avg's division where the
// algorithm left it) and returns which algorithm ran.

#include <cohort/algorithm.hpp>

#include "algorithms/args.hpp"
#include "algorithms/op_context.hpp"

namespace cohort::algorithms {

/// Defined for every Args type of args.hpp. `staging` is scratch of the communicator's own for
/// copies the normalisation needs (an input aliasing the output), separate from ctx.scratch,
/// which the algorithms use. Errors thrown by the algorithm carry it (Error::context().algorithm).
template <class Args>
Algorithm run_collective(const OpContext& ctx, ScratchPool& staging, const Args& args,
                         Algorithm forced);

/// Bytes the selection table keys on (identical on every rank; see selection.hpp).
template <class Args>
std::size_t selection_bytes(const Args& args, int world_size);

}  // namespace cohort::algorithms
