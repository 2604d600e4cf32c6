#include "comm/collective_plans.hpp"

#include <cohort/error.hpp>

#include "algorithms/dispatch.hpp"
#include "core/copy_bytes.hpp"
#include "reduce/reduce.hpp"

#include <fmt/format.h>

#include <cstring>

namespace cohort::comm {
namespace {

const std::byte* at(const void* base, std::size_t elements, DType dtype) {
  return static_cast<const std::byte*>(base) + elements * dtype_size(dtype);
}
std::byte* at(void* base, std::size_t elements, DType dtype) {
  return static_cast<std::byte*>(base) + elements * dtype_size(dtype);
}

void copy_elements(void* dst, const void* src, std::size_t count, DType dtype) {
  if (count != 0 && dst != src) copy_bytes(dst, src, count * dtype_size(dtype));
}

// Avg travels as Sum; the communicator divides once every contribution is in.
ReduceOp wire_op(ReduceOp op) {
  return op == ReduceOp::Avg ? ReduceOp::Sum : op;
}

[[noreturn]] void partial_overlap(std::string_view op, std::string_view rule) {
  throw Error(ErrorCode::InvalidArgument,
              fmt::format("{}: input and output overlap, but not as the in-place form allows "
                          "({})",
                          op, rule));
}

std::string_view name_of(OpKind kind) {
  return op_kind_name(kind);
}

// The optional counts span of a v-collective, or the uniform layout from `count`.
Layout layout_for(std::string_view op, std::optional<std::span<const std::size_t>> counts,
                  std::size_t count, const Group& g, DType dtype) {
  if (counts) return counts_layout(op, "counts", *counts, g.size, dtype);
  return uniform_layout(op, count, g.size, dtype);
}

std::vector<std::uint64_t> to_u64(const std::vector<std::size_t>& v) {
  return std::vector<std::uint64_t>(v.begin(), v.end());
}

// Uniform collectives agree on one per-rank count; v-collectives on the whole counts array.
void describe_layout(Fingerprint& fp, OpKind kind, const Layout& layout, std::size_t count) {
  const bool variable =
      kind == OpKind::Allgatherv || kind == OpKind::Gatherv || kind == OpKind::Scatterv;
  if (variable) {
    fp.counts = to_u64(layout.counts);
  } else {
    fp.count = count;
  }
}

}  // namespace

// ---- Planning (validation + normalisation decisions) ----------------------------------------

AllreducePlan plan_allreduce(const Group&, const Buffer& in, const Buffer& out, ReduceOp op) {
  constexpr std::string_view kOp = "allreduce";
  check_input(kOp, "input", in);
  check_output(kOp, "output", out);
  check_same_dtype(kOp, in, out);
  check_reduce_op(kOp, op, in.dtype());
  check_count(kOp, "output", out, in.count(), "the input's count");
  if (in.data() != out.data() && overlaps(in.data(), in.nbytes(), out.data(), out.nbytes()))
    partial_overlap(kOp, "for in-place pass the same buffer as input and output");
  return {in.data(), out.data(), in.count(), in.dtype(), op};
}

BroadcastPlan plan_broadcast(const Group& g, const Buffer& in, const Buffer& out, int root) {
  constexpr std::string_view kOp = "broadcast";
  check_root(kOp, root, g.size);
  check_output(kOp, "output", out);
  const void* source = nullptr;
  if (g.rank == root) {
    check_input(kOp, "input", in);
    check_same_dtype(kOp, in, out);
    check_count(kOp, "output", out, in.count(), "the root's input count");
    source = in.data();
  }
  return {source, out.data(), out.count(), out.dtype(), root};
}

ReducePlan plan_reduce(const Group& g, const Buffer& in, const Buffer& out, ReduceOp op, int root) {
  constexpr std::string_view kOp = "reduce";
  check_root(kOp, root, g.size);
  check_input(kOp, "input", in);
  check_reduce_op(kOp, op, in.dtype());
  ReducePlan plan{in.data(), nullptr, in.count(), in.dtype(), op, root, false};
  if (g.rank == root) {
    check_output(kOp, "output", out);
    check_same_dtype(kOp, in, out);
    check_count(kOp, "output", out, in.count(), "the input's count");
    plan.out = out.data();
    plan.stage_input = overlaps(in.data(), in.nbytes(), out.data(), out.nbytes());
  }
  return plan;
}

AllgatherPlan plan_allgather(const Group& g, const Buffer& in, const Buffer& out,
                             std::optional<std::span<const std::size_t>> counts) {
  const OpKind kind = counts ? OpKind::Allgatherv : OpKind::Allgather;
  const std::string_view op = name_of(kind);
  check_input(op, "input", in);
  check_output(op, "output", out);
  check_same_dtype(op, in, out);
  Layout layout = layout_for(op, counts, in.count(), g, in.dtype());
  const auto me = static_cast<std::size_t>(g.rank);
  if (counts) check_count(op, "input", in, layout.counts[me], fmt::format("counts[{}]", me));
  check_count(op, "output", out, layout.total,
              counts ? "the sum of counts" : "communicator size x input count");
  const std::byte* own = at(out.data(), layout.displs[me], out.dtype());
  const bool copy_own = in.data() != static_cast<const void*>(own);
  if (copy_own && overlaps(in.data(), in.nbytes(), out.data(), out.nbytes())) {
    partial_overlap(op, fmt::format("for in-place the input must be this rank's block of the "
                                    "output, at element {}",
                                    layout.displs[me]));
  }
  return {kind, in.data(), out.data(), std::move(layout), in.dtype(), copy_own};
}

GatherPlan plan_gather(const Group& g, const Buffer& in, const Buffer& out,
                       std::optional<std::span<const std::size_t>> counts, int root) {
  const OpKind kind = counts ? OpKind::Gatherv : OpKind::Gather;
  const std::string_view op = name_of(kind);
  check_root(op, root, g.size);
  check_input(op, "input", in);
  Layout layout = layout_for(op, counts, in.count(), g, in.dtype());
  const auto me = static_cast<std::size_t>(g.rank);
  if (counts) check_count(op, "input", in, layout.counts[me], fmt::format("counts[{}]", me));
  GatherPlan plan{kind, in.data(), nullptr, {}, in.dtype(), root, false};
  if (g.rank == root) {
    check_output(op, "output", out);
    check_same_dtype(op, in, out);
    check_count(op, "output", out, layout.total,
                counts ? "the sum of counts" : "communicator size x input count");
    const std::byte* own = at(out.data(), layout.displs[me], out.dtype());
    plan.out = out.data();
    plan.copy_own = in.data() != static_cast<const void*>(own);
    if (plan.copy_own && overlaps(in.data(), in.nbytes(), out.data(), out.nbytes())) {
      partial_overlap(op, fmt::format("for in-place the root's input must be its block of the "
                                      "output, at element {}",
                                      layout.displs[me]));
    }
  }
  plan.layout = std::move(layout);
  return plan;
}

ScatterPlan plan_scatter(const Group& g, const Buffer& in, const Buffer& out,
                         std::optional<std::span<const std::size_t>> counts, int root) {
  const OpKind kind = counts ? OpKind::Scatterv : OpKind::Scatter;
  const std::string_view op = name_of(kind);
  check_root(op, root, g.size);
  check_output(op, "output", out);
  Layout layout = layout_for(op, counts, out.count(), g, out.dtype());
  const auto me = static_cast<std::size_t>(g.rank);
  if (counts) check_count(op, "output", out, layout.counts[me], fmt::format("counts[{}]", me));
  ScatterPlan plan{kind, nullptr, out.data(), {}, out.dtype(), root, false};
  if (g.rank == root) {
    check_input(op, "input", in);
    check_same_dtype(op, in, out);
    check_count(op, "input", in, layout.total,
                counts ? "the sum of counts" : "communicator size x output count");
    const std::byte* own = at(in.data(), layout.displs[me], in.dtype());
    plan.in = in.data();
    plan.copy_own = out.data() != static_cast<const void*>(own);
    if (plan.copy_own && overlaps(in.data(), in.nbytes(), out.data(), out.nbytes())) {
      partial_overlap(op, fmt::format("for in-place the root's output must be its block of the "
                                      "input, at element {}",
                                      layout.displs[me]));
    }
  }
  plan.layout = std::move(layout);
  return plan;
}

ReduceScatterPlan plan_reduce_scatter(const Group& g, const Buffer& in, const Buffer& out,
                                      ReduceOp op) {
  constexpr std::string_view kOp = "reduce_scatter";
  check_input(kOp, "input", in);
  check_output(kOp, "output", out);
  check_same_dtype(kOp, in, out);
  check_reduce_op(kOp, op, in.dtype());
  const std::size_t total = checked_multiply(kOp, "output count x communicator size", out.count(),
                                             static_cast<std::size_t>(g.size));
  check_count(kOp, "input", in, total, "communicator size x output count");
  const std::byte* own = at(in.data(), out.count() * static_cast<std::size_t>(g.rank), in.dtype());
  if (out.data() != static_cast<const void*>(own) &&
      overlaps(in.data(), in.nbytes(), out.data(), out.nbytes())) {
    partial_overlap(kOp, fmt::format("for in-place the output must be this rank's block of the "
                                     "input, at element {}",
                                     out.count() * static_cast<std::size_t>(g.rank)));
  }
  return {in.data(), out.data(), out.count(), in.dtype(), op};
}

AlltoallPlan plan_alltoall(const Group& g, const Buffer& in, const Buffer& out,
                           std::optional<std::span<const std::size_t>> send_counts,
                           std::optional<std::span<const std::size_t>> recv_counts) {
  const bool variable = send_counts.has_value();
  const OpKind kind = variable ? OpKind::Alltoallv : OpKind::Alltoall;
  const std::string_view op = name_of(kind);
  check_input(op, "input", in);
  check_output(op, "output", out);
  check_same_dtype(op, in, out);
  AlltoallPlan plan{kind, in.data(), out.data(), {}, {}, in.dtype(), false};
  if (variable) {
    plan.send = counts_layout(op, "send_counts", *send_counts, g.size, in.dtype());
    plan.recv = counts_layout(op, "recv_counts", *recv_counts, g.size, in.dtype());
    check_count(op, "input", in, plan.send.total, "the sum of send_counts");
    check_count(op, "output", out, plan.recv.total, "the sum of recv_counts");
  } else {
    check_count(op, "output", out, in.count(), "the input's count");
    if (in.count() % static_cast<std::size_t>(g.size) != 0) {
      throw Error(ErrorCode::InvalidArgument,
                  fmt::format("alltoall: input count {} is not divisible by the communicator "
                              "size {}",
                              in.count(), g.size));
    }
    plan.send =
        uniform_layout(op, in.count() / static_cast<std::size_t>(g.size), g.size, in.dtype());
    plan.recv = plan.send;
  }
  plan.stage_input = overlaps(in.data(), in.nbytes(), out.data(), out.nbytes());
  return plan;
}

// ---- Fingerprints (what every rank must agree on) -------------------------------------------

Fingerprint fingerprint_of(const AllreducePlan& plan) {
  return {OpKind::Allreduce, plan.dtype, plan.op, -1, plan.count, {}, {}};
}

Fingerprint fingerprint_of(const BroadcastPlan& plan) {
  return {OpKind::Broadcast, plan.dtype, std::nullopt, plan.root, plan.count, {}, {}};
}

Fingerprint fingerprint_of(const ReducePlan& plan) {
  return {OpKind::Reduce, plan.dtype, plan.op, plan.root, plan.count, {}, {}};
}

Fingerprint fingerprint_of(const AllgatherPlan& plan) {
  Fingerprint fp{plan.kind, plan.dtype, std::nullopt, -1, 0, {}, {}};
  describe_layout(fp, plan.kind, plan.layout,
                  plan.layout.counts.empty() ? 0 : plan.layout.counts[0]);
  return fp;
}

Fingerprint fingerprint_of(const GatherPlan& plan) {
  Fingerprint fp{plan.kind, plan.dtype, std::nullopt, plan.root, 0, {}, {}};
  describe_layout(fp, plan.kind, plan.layout,
                  plan.layout.counts.empty() ? 0 : plan.layout.counts[0]);
  return fp;
}

Fingerprint fingerprint_of(const ScatterPlan& plan) {
  Fingerprint fp{plan.kind, plan.dtype, std::nullopt, plan.root, 0, {}, {}};
  describe_layout(fp, plan.kind, plan.layout,
                  plan.layout.counts.empty() ? 0 : plan.layout.counts[0]);
  return fp;
}

Fingerprint fingerprint_of(const ReduceScatterPlan& plan) {
  return {OpKind::ReduceScatter, plan.dtype, plan.op, -1, plan.count, {}, {}};
}

Fingerprint fingerprint_of(const AlltoallPlan& plan) {
  Fingerprint fp{plan.kind, plan.dtype, std::nullopt, -1, 0, {}, {}};
  if (plan.kind == OpKind::Alltoallv) {
    fp.counts = to_u64(plan.send.counts);
    fp.recv_counts = to_u64(plan.recv.counts);
  } else {
    fp.count = plan.send.counts.empty() ? 0 : plan.send.counts[0];
  }
  return fp;
}

Fingerprint fingerprint_of(const BarrierPlan&) {
  return {OpKind::Barrier, std::nullopt, std::nullopt, -1, 0, {}, {}};
}

// ---- Execution (normalise, run the algorithm, finish) ----------------------------------------

void execute(const algorithms::OpContext& ctx, algorithms::ScratchPool&, const AllreducePlan& plan,
             Algorithm forced) {
  // Avg reaches the algorithms as itself (every kernel combines it like Sum); the shared-memory
  // engine divides while its sums are in cache, every other algorithm leaves it to this pass.
  const Algorithm ran = algorithms::run_allreduce(
      ctx, {plan.in, plan.out, plan.count, plan.dtype, plan.op}, forced);
  if (plan.op == ReduceOp::Avg && ran != Algorithm::SharedMemory)
    reduce::divide_by(plan.dtype, plan.out, plan.count, static_cast<std::size_t>(ctx.size));
}

void execute(const algorithms::OpContext& ctx, algorithms::ScratchPool&, const BroadcastPlan& plan,
             Algorithm forced) {
  // Broadcast is in place for the algorithms: the root's data must already sit in out.
  if (ctx.rank == plan.root && plan.count != 0 && plan.in != plan.out)
    move_bytes(plan.out, plan.in, plan.count * dtype_size(plan.dtype));
  algorithms::run_broadcast(ctx, {plan.out, plan.count, plan.dtype, plan.root}, forced);
}

void execute(const algorithms::OpContext& ctx, algorithms::ScratchPool& staging,
             const ReducePlan& plan, Algorithm forced) {
  const void* in = plan.in;
  if (plan.stage_input && plan.count != 0) {
    const std::size_t bytes = plan.count * dtype_size(plan.dtype);
    std::byte* copy = staging.get(bytes);
    copy_bytes(copy, plan.in, bytes);
    in = copy;
  }
  algorithms::run_reduce(ctx, {in, plan.out, plan.count, plan.dtype, wire_op(plan.op), plan.root},
                         forced);
  if (plan.op == ReduceOp::Avg && ctx.rank == plan.root)
    reduce::divide_by(plan.dtype, plan.out, plan.count, static_cast<std::size_t>(ctx.size));
}

void execute(const algorithms::OpContext& ctx, algorithms::ScratchPool&, const AllgatherPlan& plan,
             Algorithm forced) {
  const auto me = static_cast<std::size_t>(ctx.rank);
  if (plan.copy_own) {
    copy_elements(at(plan.out, plan.layout.displs[me], plan.dtype), plan.in, plan.layout.counts[me],
                  plan.dtype);
  }
  algorithms::run_allgather(ctx, {plan.out, plan.layout.counts, plan.layout.displs, plan.dtype},
                            forced);
}

void execute(const algorithms::OpContext& ctx, algorithms::ScratchPool&, const GatherPlan& plan,
             Algorithm forced) {
  const auto me = static_cast<std::size_t>(ctx.rank);
  if (ctx.rank == plan.root && plan.copy_own) {
    copy_elements(at(plan.out, plan.layout.displs[me], plan.dtype), plan.in, plan.layout.counts[me],
                  plan.dtype);
  }
  algorithms::run_gather(
      ctx, {plan.in, plan.out, plan.layout.counts, plan.layout.displs, plan.dtype, plan.root},
      forced);
}

void execute(const algorithms::OpContext& ctx, algorithms::ScratchPool&, const ScatterPlan& plan,
             Algorithm forced) {
  const auto me = static_cast<std::size_t>(ctx.rank);
  if (ctx.rank == plan.root && plan.copy_own) {
    copy_elements(plan.out, at(plan.in, plan.layout.displs[me], plan.dtype), plan.layout.counts[me],
                  plan.dtype);
  }
  algorithms::run_scatter(
      ctx, {plan.in, plan.out, plan.layout.counts, plan.layout.displs, plan.dtype, plan.root},
      forced);
}

void execute(const algorithms::OpContext& ctx, algorithms::ScratchPool&,
             const ReduceScatterPlan& plan, Algorithm forced) {
  algorithms::run_reduce_scatter(ctx, {plan.in, plan.out, plan.count, plan.dtype, wire_op(plan.op)},
                                 forced);
  if (plan.op == ReduceOp::Avg)
    reduce::divide_by(plan.dtype, plan.out, plan.count, static_cast<std::size_t>(ctx.size));
}

void execute(const algorithms::OpContext& ctx, algorithms::ScratchPool& staging,
             const AlltoallPlan& plan, Algorithm forced) {
  const void* in = plan.in;
  if (plan.stage_input && plan.send.total != 0) {
    // The algorithms need disjoint buffers; an aliasing call exchanges from a copy.
    const std::size_t bytes = plan.send.total * dtype_size(plan.dtype);
    std::byte* copy = staging.get(bytes);
    copy_bytes(copy, plan.in, bytes);
    in = copy;
  }
  algorithms::run_alltoall(ctx,
                           {in, plan.out, plan.send.counts, plan.send.displs, plan.recv.counts,
                            plan.recv.displs, plan.dtype, plan.kind == OpKind::Alltoall},
                           forced);
}

void execute(const algorithms::OpContext& ctx, algorithms::ScratchPool&, const BarrierPlan&,
             Algorithm forced) {
  algorithms::run_barrier(ctx, forced);
}

}  // namespace cohort::comm
