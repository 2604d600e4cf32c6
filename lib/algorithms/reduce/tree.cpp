// Binomial-tree reduce.
//
// How it works: ranks are numbered relative to the root (patterns/binomial_tree.hpp). Each rank
// reduces its children's partial results into its own, smallest subtree first (those finish
// first), then sends the partial result to its parent; the root's lands in `out`. The first
// reduction writes acc = in op received, so `in` is never copied, and on a root in place (in ==
// out) each element of `in` is read before it is overwritten: no staged copy either. Receives
// from two children are in flight at once, so the next child's data arrives while the current
// one is reduced. The combining order is fixed by (world size, root), so the result is
// deterministic.
//
// Above kSegmentedMinBytes, on up to 4 ranks (where the root has at most two children), the
// vector goes in segments of kRingChunkBytes down every edge of the tree, in the same order at
// every rank, so a rank reduces segment s while segment s + 1 arrives and its parent reduces
// segment s - 1: the reductions overlap the transfers instead of following each one (2 ranks
// across a 4 Gbit/s link, 16-256 MiB: 0.95-1.02 of the link's tag_bw, whole messages 0.91-0.99;
// bench/PERFORMANCE-LOG.md, "Reduce's tree in segments"). Every segment's receive is posted at
// once: segments that arrive before theirs cost the transport a copy.
//
// Cost, n ranks, m bytes: ceil(log2 n) rounds on the critical path, each moving and reducing
// m bytes; the root receives ceil(log2 n) * m. Latency-optimal; the reduce-scatter + gather
// reduce moves less for large m. Accepts every world size, root and count.
// Scratch: the partial result (non-roots, kSlotWork0) and two receive buffers (kSlotWork1/2;
// segmented: one per child, in kSlotWork1).

#include "algorithms/descriptor.hpp"
#include "algorithms/engines/point_to_point.hpp"
#include "algorithms/engines/ring_pipeline.hpp"
#include "algorithms/engines/scratch_slots.hpp"
#include "core/copy_bytes.hpp"
#include "patterns/binomial_tree.hpp"
#include "patterns/block_partition.hpp"
#include "patterns/ring.hpp"
#include "reduce/reduce.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <vector>

namespace cohort::algorithms {

namespace {

/// Vectors from here on go in segments (two segments of kRingChunkBytes at least).
constexpr std::size_t kSegmentedMinBytes = 2 * kRingChunkBytes;

/// The segmented tree (see the top): `children` in the order the whole-vector tree folds them.
void run_segmented(const OpContext& ctx, const ReduceArgs& args, const std::vector<int>& children,
                   int parent, bool is_root) {
  const std::size_t es = dtype_size(args.dtype);
  const std::size_t bytes = args.count * es;
  const std::size_t segment = std::max<std::size_t>(1, kRingChunkBytes / es);
  const std::size_t segments = patterns::pieces_needed(args.count, segment);
  const auto count_of = [&](std::size_t s) { return std::min(segment, args.count - s * segment); };
  const auto* in = static_cast<const std::byte*>(args.in);
  constexpr std::uint32_t kStep = 0;  // messages of one edge match in posting order
  RequestBatch to_parent(ctx);
  if (children.empty()) {  // a leaf sends its input, segment by segment
    for (std::size_t s = 0; s < segments; ++s)
      to_parent.send(parent, in + s * segment * es, count_of(s) * es, kStep);
    to_parent.wait();
    return;
  }
  std::byte* acc = is_root ? static_cast<std::byte*>(args.out) : ctx.scratch.get(bytes, kSlotWork0);
  // Every segment's receive is posted at once, each child's into a whole vector of its own: a
  // segment that arrived before its receive was posted would be held and copied once more by the
  // transport (eager messages over TCP), which cost more than the overlap gained.
  const std::size_t kids = children.size();
  std::byte* landing = ctx.scratch.get(kids * bytes, kSlotWork1);
  std::vector<transport::Request> pending(kids * segments);
  for (std::size_t s = 0; s < segments; ++s)
    for (std::size_t i = 0; i < kids; ++i)
      pending[s * kids + i] = post_recv(ctx, children[i], landing + i * bytes + s * segment * es,
                                        count_of(s) * es, kStep);
  for (std::size_t s = 0; s < segments; ++s) {
    const std::size_t at = s * segment * es;
    const std::byte* current = in + at;
    for (std::size_t i = 0; i < kids; ++i) {
      wait_request(ctx, pending[s * kids + i]);
      reduce::reduce_to(args.op, args.dtype, acc + at, current, landing + i * bytes + at,
                        count_of(s));
      current = acc + at;
    }
    if (parent >= 0) to_parent.send(parent, acc + at, count_of(s) * es, kStep);
  }
  to_parent.wait();
}

void run(const OpContext& ctx, const ReduceArgs& args) {
  const std::size_t bytes = args.count * dtype_size(args.dtype);
  const auto* in = static_cast<const std::byte*>(args.in);
  auto* out = static_cast<std::byte*>(args.out);
  if (bytes == 0) return;
  if (ctx.size == 1) {
    if (out != in) copy_bytes(out, in, bytes);
    return;
  }
  const int v = patterns::relative_rank(ctx.rank, args.root, ctx.size);
  const auto children = patterns::binomial_children(v, ctx.size);
  const int parent =
      v == 0 ? -1 : patterns::absolute_rank(patterns::binomial_parent(v), args.root, ctx.size);
  // Segmented only where its scratch (a whole vector per child) is no more than the whole-vector
  // tree's two receive buffers on every rank: where the root, which has the most children, has
  // at most two (2 to 4 ranks; the table runs the tree for large vectors on 2, reduce-scatter +
  // gather from 3). Decided alike on every rank, so both ends of an edge cut the same messages.
  if (bytes >= kSegmentedMinBytes && patterns::binomial_children(0, ctx.size).size() <= 2) {
    std::vector<int> child_ranks;
    for (int child : children)
      child_ranks.push_back(patterns::absolute_rank(child, args.root, ctx.size));
    run_segmented(ctx, args, child_ranks, parent, v == 0);
    return;
  }
  constexpr std::uint32_t kStep = 0;  // one message per tree edge: one step suffices

  // A leaf's partial result is its input: send it as is.
  if (children.empty()) {
    RequestBatch to_parent(ctx);
    to_parent.send(parent, in, bytes, kStep);
    to_parent.wait();
    return;
  }
  std::byte* acc = v == 0 ? out : ctx.scratch.get(bytes, kSlotWork0);
  const std::array<std::byte*, 2> landing{ctx.scratch.get(bytes, kSlotWork1),
                                          ctx.scratch.get(bytes, kSlotWork2)};
  std::array<transport::Request, 2> pending;
  auto child_rank = [&](std::size_t i) {
    return patterns::absolute_rank(children[i], args.root, ctx.size);
  };
  // 1. Start receiving from the first two children.
  for (std::size_t i = 0; i < children.size() && i < 2; ++i)
    pending[i] = post_recv(ctx, child_rank(i), landing[i], bytes, kStep);
  // 2. For each child in order: wait for its partial result, fold it in, and reuse its buffer
  //    for the child after next.
  const std::byte* current = in;
  for (std::size_t i = 0; i < children.size(); ++i) {
    wait_request(ctx, pending[i % 2]);
    reduce::reduce_to(args.op, args.dtype, acc, current, landing[i % 2], args.count);
    current = acc;
    if (i + 2 < children.size())
      pending[i % 2] = post_recv(ctx, child_rank(i + 2), landing[i % 2], bytes, kStep);
  }
  // 3. Pass the subtree's result up.
  if (parent >= 0) {
    RequestBatch to_parent(ctx);
    to_parent.send(parent, acc, bytes, kStep);
    to_parent.wait();
  }
}

}  // namespace

extern const AlgorithmDescriptor reduce_tree =
    describe<run>(Algorithm::Tree, "Binomial-tree reduce");

}  // namespace cohort::algorithms
