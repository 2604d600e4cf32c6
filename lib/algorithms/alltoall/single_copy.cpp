// Single-copy alltoall(v), for ranks of one host that may read each other's memory
// (engines/single_copy.hpp).
//
// How it works: every rank exposes one entry per destination (where that rank's block is in its
// input), copies its own block locally (unless in place left it where it belongs), then copies the
// block each other rank has for it straight out of that rank's input, in ring order from the next
// rank; then all wait until every rank is done reading.
//
// Cost per rank: every received byte copied once (the arena path: written into the segment by
// its sender and read out by its receiver), two handoffs. Input and output never overlap here
// (an in-place alltoall's input was staged first, normalise.hpp).

#include "algorithms/engines/single_copy.hpp"
#include "algorithms/descriptor.hpp"
#include "core/copy_bytes.hpp"

#include <algorithm>

namespace cohort::algorithms {
namespace {

void run(const OpContext& ctx, const AlltoallArgs& args) {
  const std::size_t es = dtype_size(args.dtype);
  const auto me = static_cast<std::size_t>(ctx.rank);
  const auto* in = static_cast<const std::byte*>(args.in);
  auto* out = static_cast<std::byte*>(args.out);
  SingleCopyOp op(ctx, *ctx.arena());
  op.expose_layout(in, args.send_counts, args.send_displs, es);
  if (!args.own_block_in_place)
    copy_bytes(out + args.recv_displs[me] * es, in + args.send_displs[me] * es,
               std::min(args.send_counts[me], args.recv_counts[me]) * es);
  for (int k = 1; k < ctx.size; ++k) {
    const auto r = static_cast<std::size_t>((ctx.rank + k) % ctx.size);
    op.read(static_cast<int>(r), me, out + args.recv_displs[r] * es, args.recv_counts[r] * es);
  }
  op.release_after_all();
}

}  // namespace

extern const AlgorithmDescriptor alltoall_single_copy = describe<run, reading_peers<AlltoallArgs>>(
    Algorithm::SingleCopy,
    "Single-copy alltoall(v): each rank copies its blocks out of their senders' buffers");

}  // namespace cohort::algorithms
