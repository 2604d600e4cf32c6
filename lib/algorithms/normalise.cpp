// The in-place normalisation of each collective (see normalise.hpp).

#include "algorithms/normalise.hpp"

#include "core/copy_bytes.hpp"
#include "reduce/reduce.hpp"

namespace cohort::algorithms {
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

bool overlaps(const void* a, std::size_t a_bytes, const void* b, std::size_t b_bytes) {
  const auto* x = static_cast<const std::byte*>(a);
  const auto* y = static_cast<const std::byte*>(b);
  return a_bytes != 0 && b_bytes != 0 && x < y + b_bytes && y < x + a_bytes;
}

/// A copy of `bytes` at `in` in the communicator's staging scratch.
const void* staged(ScratchPool& staging, const void* in, std::size_t bytes) {
  std::byte* copy = staging.get(bytes);
  copy_bytes(copy, in, bytes);
  return copy;
}

// Avg travels as Sum; finish() divides once every contribution is in.
ReduceOp wire_op(ReduceOp op) {
  return op == ReduceOp::Avg ? ReduceOp::Sum : op;
}

}  // namespace

template <>
Normalised<AllreduceArgs>::Normalised(const OpContext&, ScratchPool&, const AllreduceArgs& args)
    : original_(args) {}

template <>
Normalised<BroadcastArgs>::Normalised(const OpContext& ctx, ScratchPool&, const BroadcastArgs& args)
    : original_(args) {
  // Overlapping but unequal root buffers were refused at validation; move_bytes is belt and braces.
  if (ctx.rank == args.root && args.count != 0 && args.in != args.out)
    move_bytes(args.out, args.in, args.count * dtype_size(args.dtype));
}

template <>
Normalised<ReduceArgs>::Normalised(const OpContext& ctx, ScratchPool& staging,
                                   const ReduceArgs& args)
    : original_(args), copy_(args) {
  copy_->op = wire_op(args.op);
  const std::size_t bytes = args.count * dtype_size(args.dtype);
  if (ctx.rank == args.root && overlaps(args.in, bytes, args.out, bytes))
    copy_->in = staged(staging, args.in, bytes);
}

template <>
Normalised<AllgatherArgs>::Normalised(const OpContext& ctx, ScratchPool&, const AllgatherArgs& args)
    : original_(args) {
  const auto me = static_cast<std::size_t>(ctx.rank);
  copy_elements(at(args.out, args.displs[me], args.dtype), args.in, args.counts[me], args.dtype);
}

template <>
Normalised<GatherArgs>::Normalised(const OpContext& ctx, ScratchPool&, const GatherArgs& args)
    : original_(args) {
  const auto me = static_cast<std::size_t>(ctx.rank);
  if (ctx.rank == args.root)
    copy_elements(at(args.out, args.displs[me], args.dtype), args.in, args.counts[me], args.dtype);
}

template <>
Normalised<ScatterArgs>::Normalised(const OpContext& ctx, ScratchPool&, const ScatterArgs& args)
    : original_(args) {
  const auto me = static_cast<std::size_t>(ctx.rank);
  if (ctx.rank == args.root)
    copy_elements(args.out, at(args.in, args.displs[me], args.dtype), args.counts[me], args.dtype);
}

template <>
Normalised<ReduceScatterArgs>::Normalised(const OpContext&, ScratchPool&,
                                          const ReduceScatterArgs& args)
    : original_(args), copy_(args) {
  copy_->op = wire_op(args.op);
}

template <>
Normalised<AlltoallArgs>::Normalised(const OpContext&, ScratchPool& staging,
                                     const AlltoallArgs& args)
    : original_(args) {
  // The algorithms need disjoint buffers; an aliasing call exchanges from a copy. Only this rare
  // form pays for copying the counts.
  const std::size_t in_bytes = args.send_total * dtype_size(args.dtype);
  if (overlaps(args.in, in_bytes, args.out, args.recv_total * dtype_size(args.dtype))) {
    copy_.emplace(args);
    copy_->in = staged(staging, args.in, in_bytes);
  }
}

template <>
Normalised<BarrierArgs>::Normalised(const OpContext&, ScratchPool&, const BarrierArgs& args)
    : original_(args) {}

void finish(const OpContext& ctx, const AllreduceArgs& args, Algorithm ran) {
  // Avg reaches the allreduce algorithms as itself (every kernel combines it like Sum); the
  // shared-memory engine divides while its sums are in cache, every other one leaves it here.
  if (args.op == ReduceOp::Avg && ran != Algorithm::SharedMemory)
    reduce::divide_by(args.dtype, args.out, args.count, static_cast<std::size_t>(ctx.size));
}

void finish(const OpContext& ctx, const ReduceArgs& args, Algorithm) {
  if (args.op == ReduceOp::Avg && ctx.rank == args.root)
    reduce::divide_by(args.dtype, args.out, args.count, static_cast<std::size_t>(ctx.size));
}

void finish(const OpContext& ctx, const ReduceScatterArgs& args, Algorithm) {
  if (args.op == ReduceOp::Avg)
    reduce::divide_by(args.dtype, args.out, args.count, static_cast<std::size_t>(ctx.size));
}

}  // namespace cohort::algorithms
