#pragma once

// The reduction engine behind the shared-memory allreduce and reduce
// (transport/shared_arena.hpp): one implementation of the direct, share and root schemes,
// described in shared_memory_reduction.cpp.

#include "algorithms/op_context.hpp"

#include <cohort/dtype.hpp>

#include <cstddef>

namespace cohort::algorithms {

/// out = op over ranks of in (count elements), written on every rank whose `out` is not null
/// (allreduce: every rank; reduce: the root). `in` may equal `out`. Needs ctx.arena and a world
/// of two or more; every rank must call it with the same count, dtype and op. Avg is finished
/// here (the sums divided by the world size where they are still in cache): callers must not
/// divide again.
void shared_memory_reduction(const OpContext& ctx, const void* in, void* out, std::size_t count,
                             DType dtype, ReduceOp op);

/// out = op over ranks of in, written only on the one rank whose `out` is not null (reduce's
/// root), which does all the reducing; the others only copy their input into the arena. Same
/// requirements, Avg handling and bits as shared_memory_reduction.
void shared_memory_reduction_at_root(const OpContext& ctx, const void* in, void* out,
                                     std::size_t count, DType dtype, ReduceOp op);

}  // namespace cohort::algorithms
