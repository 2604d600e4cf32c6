// The in-place normalisation of each collective (see normalise.hpp).

#include "algorithms/normalise.hpp"

#include "core/copy_bytes.hpp"
#include "reduce/reduce.hpp"

#include <algorithm>

namespace cohort::algorithms {
namespace {

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

/// Elements spanned by blocks of `counts` at `displs`, gaps included.
std::size_t extent(const RankSizes& counts, const RankSizes& displs) {
  std::size_t end = 0;
  for (std::size_t j = 0; j < counts.size(); ++j)
    if (counts[j] != 0) end = std::max(end, displs[j] + counts[j]);
  return end;
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

/// A copy of `count` elements at `in`, each divided by the number of ranks, for Avg on formats
/// whose sum overflows long before their mean does (f16 tops out at 65504, e4m3 at 448).
const void* premultiplied(const OpContext& ctx, ScratchPool& staging, const void* in,
                          std::size_t count, DType dtype) {
  const std::size_t bytes = count * dtype_size(dtype);
  std::byte* copy = staging.get(bytes);
  copy_bytes(copy, in, bytes);
  reduce::divide_by(dtype, copy, count, static_cast<std::size_t>(ctx.size));
  return copy;
}

}  // namespace

bool premultiplies_avg(ReduceOp op, DType dtype) noexcept {
  if (op != ReduceOp::Avg) return false;
  switch (dtype) {
    case DType::Float16:
    case DType::BFloat16:
    case DType::Float8E4M3:
    case DType::Float8E5M2: return true;
    default: return false;
  }
}

template <>
Normalised<AllreduceArgs>::Normalised(const OpContext& ctx, ScratchPool& staging,
                                      const AllreduceArgs& args)
    : original_(args) {
  if (!premultiplies_avg(args.op, args.dtype) || args.count == 0) return;
  copy_.emplace(args);
  copy_->in = premultiplied(ctx, staging, args.in, args.count, args.dtype);
  copy_->op = ReduceOp::Sum;
}

template <>
Normalised<ReduceArgs>::Normalised(const OpContext& ctx, ScratchPool& staging,
                                   const ReduceArgs& args)
    : original_(args), copy_(args) {
  copy_->op = wire_op(args.op);
  const std::size_t bytes = args.count * dtype_size(args.dtype);
  if (premultiplies_avg(args.op, args.dtype) && args.count != 0)
    copy_->in = premultiplied(ctx, staging, args.in, args.count, args.dtype);  // also unaliases
  else if (ctx.rank == args.root && args.in != args.out &&
           overlaps(args.in, bytes, args.out, bytes))
    copy_->in = staged(staging, args.in, bytes);  // in place (in == out) goes through as it is
}

template <>
Normalised<AllgatherArgs>::Normalised(const OpContext& ctx, ScratchPool&, const AllgatherArgs& args)
    : original_(args) {
  const auto me = static_cast<std::size_t>(ctx.rank);
  copy_elements(at(args.out, args.displs[me], args.dtype), args.in, args.counts[me], args.dtype);
}

template <>
Normalised<GatherArgs>::Normalised(const OpContext&, ScratchPool&, const GatherArgs& args)
    : original_(args) {}  // each algorithm copies the root's own block itself (see args.hpp)

template <>
Normalised<ScatterArgs>::Normalised(const OpContext&, ScratchPool&, const ScatterArgs& args)
    : original_(args) {}  // each algorithm copies the root's own block itself (see args.hpp)

template <>
Normalised<ReduceScatterArgs>::Normalised(const OpContext& ctx, ScratchPool& staging,
                                          const ReduceScatterArgs& args)
    : original_(args), copy_(args) {
  copy_->op = wire_op(args.op);
  if (premultiplies_avg(args.op, args.dtype) && args.count != 0)
    copy_->in = premultiplied(ctx, staging, args.in,
                              args.count * static_cast<std::size_t>(ctx.size), args.dtype);
}

template <>
Normalised<AlltoallArgs>::Normalised(const OpContext& ctx, ScratchPool& staging,
                                     const AlltoallArgs& args)
    : original_(args) {
  // The algorithms need disjoint buffers; an aliasing call exchanges from a copy. Only this rare
  // form pays for copying the counts.
  const std::size_t es = dtype_size(args.dtype);
  // Spans, not totals: displacements may leave gaps (the communicator's never do).
  const std::size_t in_bytes = extent(args.send_counts, args.send_displs) * es;
  if (!overlaps(args.in, in_bytes, args.out, extent(args.recv_counts, args.recv_displs) * es))
    return;
  copy_.emplace(args);
  // When this rank's own block is at one address in both (in place, or overlapping buffers that
  // line it up), it is already where it belongs: the copy leaves it out (blocks are disjoint,
  // so no other block shares its bytes). On 2 ranks that halves the bytes staged and saves the
  // own block's copy back. An empty own block gains nothing and may lie past the span.
  const auto me = static_cast<std::size_t>(ctx.rank);
  const std::size_t own_offset = args.send_displs[me] * es;
  const std::size_t own_bytes = args.send_counts[me] * es;
  if (own_bytes != 0 && args.send_counts[me] == args.recv_counts[me] &&
      at(const_cast<void*>(args.in), args.send_displs[me], args.dtype) ==
          at(args.out, args.recv_displs[me], args.dtype)) {
    std::byte* copy = staging.get(in_bytes);
    const auto* from = static_cast<const std::byte*>(args.in);
    copy_bytes(copy, from, own_offset);
    copy_bytes(copy + own_offset + own_bytes, from + own_offset + own_bytes,
               in_bytes - own_offset - own_bytes);
    copy_->in = copy;
    copy_->own_block_in_place = true;
    return;
  }
  copy_->in = staged(staging, args.in, in_bytes);
}

template <>
Normalised<BroadcastArgs>::Normalised(const OpContext&, ScratchPool&, const BroadcastArgs& args)
    : original_(args) {}  // each algorithm copies the root's input itself (root_input.hpp)

template <>
Normalised<BarrierArgs>::Normalised(const OpContext&, ScratchPool&, const BarrierArgs& args)
    : original_(args) {}

void finish(const OpContext& ctx, const AllreduceArgs& args, Algorithm ran) {
  // Avg reaches the allreduce algorithms as itself (every kernel combines it like Sum); the
  // shared-memory engine divides while its sums are in cache, every other one leaves it here.
  if (args.op == ReduceOp::Avg && !premultiplies_avg(args.op, args.dtype) &&
      ran != Algorithm::SharedMemory)
    reduce::divide_by(args.dtype, args.out, args.count, static_cast<std::size_t>(ctx.size));
}

void finish(const OpContext& ctx, const ReduceArgs& args, Algorithm) {
  if (args.op == ReduceOp::Avg && !premultiplies_avg(args.op, args.dtype) && ctx.rank == args.root)
    reduce::divide_by(args.dtype, args.out, args.count, static_cast<std::size_t>(ctx.size));
}

void finish(const OpContext& ctx, const ReduceScatterArgs& args, Algorithm) {
  if (args.op == ReduceOp::Avg && !premultiplies_avg(args.op, args.dtype))
    reduce::divide_by(args.dtype, args.out, args.count, static_cast<std::size_t>(ctx.size));
}

}  // namespace cohort::algorithms
