#pragma once

// A plan is one collective call after validation and before execution: raw pointers, counts,
// layouts and what normalisation the op needs (copying this rank's own block into place,
// staging an aliasing input, finishing Avg). plan_*() run on the caller's thread and throw
// Error(InvalidArgument) before any byte moves; execute() runs on whichever thread drives the
// transport and calls into algorithms/dispatch.hpp with the arguments args.hpp documents.

#include <cohort/algorithm.hpp>
#include <cohort/buffer.hpp>

#include "algorithms/op_context.hpp"
#include "comm/fingerprint.hpp"
#include "comm/validation.hpp"

#include <span>

namespace cohort::comm {

/// This rank's place in the communicator.
struct Group {
  int rank;
  int size;
};

struct AllreducePlan {
  const void* in;
  void* out;
  std::size_t count;
  DType dtype;
  ReduceOp op;
};

struct BroadcastPlan {
  const void* in;  ///< root only; may equal out (then nothing is copied)
  void* out;
  std::size_t count;
  DType dtype;
  int root;
};

struct ReducePlan {
  const void* in;
  void* out;  ///< root only, null elsewhere
  std::size_t count;
  DType dtype;
  ReduceOp op;
  int root;
  bool stage_input;  ///< in overlaps out on root: the input is copied aside first
};

/// allgather and allgatherv.
struct AllgatherPlan {
  OpKind kind;
  const void* in;
  void* out;
  Layout layout;
  DType dtype;
  bool copy_own;  ///< false when in already is this rank's block of out
};

/// gather and gatherv.
struct GatherPlan {
  OpKind kind;
  const void* in;
  void* out;  ///< root only
  Layout layout;
  DType dtype;
  int root;
  bool copy_own;  ///< root: in is not yet its block of out
};

/// scatter and scatterv.
struct ScatterPlan {
  OpKind kind;
  const void* in;  ///< root only
  void* out;
  Layout layout;
  DType dtype;
  int root;
  bool copy_own;  ///< root: out is not already its block of in
};

struct ReduceScatterPlan {
  const void* in;
  void* out;
  std::size_t count;  ///< per rank (out's count)
  DType dtype;
  ReduceOp op;
};

/// alltoall and alltoallv.
struct AlltoallPlan {
  OpKind kind;
  const void* in;
  void* out;
  Layout send;
  Layout recv;
  DType dtype;
  bool stage_input;  ///< in overlaps out: the input is copied aside first
};

/// Barrier has no arguments; the type lets it share the plan machinery.
struct BarrierPlan {};

AllreducePlan plan_allreduce(const Group& g, const Buffer& in, const Buffer& out, ReduceOp op);
BroadcastPlan plan_broadcast(const Group& g, const Buffer& in, const Buffer& out, int root);
ReducePlan plan_reduce(const Group& g, const Buffer& in, const Buffer& out, ReduceOp op, int root);
/// counts empty: uniform allgather.
AllgatherPlan plan_allgather(const Group& g, const Buffer& in, const Buffer& out,
                             std::optional<std::span<const std::size_t>> counts);
GatherPlan plan_gather(const Group& g, const Buffer& in, const Buffer& out,
                       std::optional<std::span<const std::size_t>> counts, int root);
ScatterPlan plan_scatter(const Group& g, const Buffer& in, const Buffer& out,
                         std::optional<std::span<const std::size_t>> counts, int root);
ReduceScatterPlan plan_reduce_scatter(const Group& g, const Buffer& in, const Buffer& out,
                                      ReduceOp op);
AlltoallPlan plan_alltoall(const Group& g, const Buffer& in, const Buffer& out,
                           std::optional<std::span<const std::size_t>> send_counts,
                           std::optional<std::span<const std::size_t>> recv_counts);

Fingerprint fingerprint_of(const AllreducePlan& plan);
Fingerprint fingerprint_of(const BroadcastPlan& plan);
Fingerprint fingerprint_of(const ReducePlan& plan);
Fingerprint fingerprint_of(const AllgatherPlan& plan);
Fingerprint fingerprint_of(const GatherPlan& plan);
Fingerprint fingerprint_of(const ScatterPlan& plan);
Fingerprint fingerprint_of(const ReduceScatterPlan& plan);
Fingerprint fingerprint_of(const AlltoallPlan& plan);
Fingerprint fingerprint_of(const BarrierPlan& plan);

/// `staging` is the communicator's own scratch (the algorithms use ctx.scratch).
void execute(const algorithms::OpContext& ctx, algorithms::ScratchPool& staging,
             const AllreducePlan& plan, Algorithm forced);
void execute(const algorithms::OpContext& ctx, algorithms::ScratchPool& staging,
             const BroadcastPlan& plan, Algorithm forced);
void execute(const algorithms::OpContext& ctx, algorithms::ScratchPool& staging,
             const ReducePlan& plan, Algorithm forced);
void execute(const algorithms::OpContext& ctx, algorithms::ScratchPool& staging,
             const AllgatherPlan& plan, Algorithm forced);
void execute(const algorithms::OpContext& ctx, algorithms::ScratchPool& staging,
             const GatherPlan& plan, Algorithm forced);
void execute(const algorithms::OpContext& ctx, algorithms::ScratchPool& staging,
             const ScatterPlan& plan, Algorithm forced);
void execute(const algorithms::OpContext& ctx, algorithms::ScratchPool& staging,
             const ReduceScatterPlan& plan, Algorithm forced);
void execute(const algorithms::OpContext& ctx, algorithms::ScratchPool& staging,
             const AlltoallPlan& plan, Algorithm forced);
void execute(const algorithms::OpContext& ctx, algorithms::ScratchPool& staging,
             const BarrierPlan& plan, Algorithm forced);

}  // namespace cohort::comm
