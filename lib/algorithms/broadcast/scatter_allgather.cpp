// Scatter + allgather broadcast (van de Geijn), for large messages.
//
// How it works: the message is cut into n balanced blocks indexed by rank relative to the root.
// A binomial-tree scatter gives each relative rank v its block v (every subtree's blocks are
// contiguous, so each tree edge carries one message: the blocks of the child's subtree). A ring
// allgather over relative ranks, pipelined in chunks (ring_pipeline.hpp), then gives every rank
// every block. Everything happens in place in `buf`.
//
// Cost, n ranks, m bytes: scatter ceil(log2 n) rounds, the root sending (n - 1)/n * m;
// allgather n - 1 steps of m/n each. An out-of-place root first copies its input into its output
// (both phases work in place there). Every rank sends at most about 2m (the tree broadcast's
// root sends log2(n) * m), at the price of n - 1 extra latency terms. Accepts every world size,
// root and count (blocks may be empty when count < n).

#include "algorithms/broadcast/root_input.hpp"
#include "algorithms/descriptor.hpp"
#include "algorithms/engines/point_to_point.hpp"
#include "algorithms/engines/ring_pipeline.hpp"
#include "patterns/binomial_tree.hpp"
#include "patterns/block_partition.hpp"
#include "patterns/ring.hpp"

#include <vector>

namespace cohort::algorithms {

namespace {

void run(const OpContext& ctx, const BroadcastArgs& args) {
  const std::size_t es = dtype_size(args.dtype);
  if (ctx.rank == args.root) copy_root_input(args);
  if (ctx.size == 1 || args.count == 0) return;
  auto* buf = static_cast<std::byte*>(args.out);
  const auto n = static_cast<std::size_t>(ctx.size);
  const int v = patterns::relative_rank(ctx.rank, args.root, ctx.size);
  // Byte range of relative ranks [first, first + extent)'s blocks.
  auto span_start = [&](int relative) {
    return patterns::balanced_offset(args.count, n, static_cast<std::size_t>(relative)) * es;
  };
  constexpr std::uint32_t kScatterStep = 0;
  constexpr std::uint32_t kAllgatherFirstStep = 1;

  // 1. Scatter: receive our subtree's blocks from the parent ...
  if (v != 0) {
    const int extent = patterns::binomial_subtree_extent(v, ctx.size);
    RequestBatch from_parent(ctx);
    from_parent.recv(patterns::absolute_rank(patterns::binomial_parent(v), args.root, ctx.size),
                     buf + span_start(v), span_start(v + extent) - span_start(v), kScatterStep);
    from_parent.wait();
  }
  // ... and pass each child its subtree's blocks, deepest subtree first.
  const auto children = patterns::binomial_children(v, ctx.size);
  RequestBatch to_children(ctx);
  for (auto child = children.rbegin(); child != children.rend(); ++child) {
    const int extent = patterns::binomial_subtree_extent(*child, ctx.size);
    to_children.send(patterns::absolute_rank(*child, args.root, ctx.size), buf + span_start(*child),
                     span_start(*child + extent) - span_start(*child), kScatterStep);
  }
  to_children.wait();

  // 2. Ring allgather over relative ranks: relative rank v holds block v.
  const BalancedBlocks table(args.count, n);
  const std::vector<std::size_t>& offsets = table.offsets;
  const std::vector<std::size_t>& counts = table.counts;
  ring_allgather(ctx, rooted_ring(ctx, args.root), buf, RingBlocks{offsets, counts}, args.dtype,
                 kAllgatherFirstStep);
}

}  // namespace

extern const AlgorithmDescriptor broadcast_scatter_allgather =
    describe<run>(Algorithm::ScatterAllgather,
                  "Scatter + allgather broadcast (van de Geijn), for large messages");

}  // namespace cohort::algorithms
