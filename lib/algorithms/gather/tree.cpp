// Binomial-tree gather (gatherv).
//
// How it works: ranks are numbered relative to the root; the subtree of relative rank v is the
// contiguous range [v, v + extent) (patterns/binomial_tree.hpp). A leaf sends its block to its
// parent. An inner rank packs its own block and its children's subtrees, in relative-rank order,
// into one scratch buffer and sends that upward as one message. The root receives each child's
// subtree straight into `out` when those blocks are back to back there in relative order (the
// usual layout with root 0), otherwise into scratch, and then copies blocks to their displacements.
//
// Cost, n ranks, total m bytes: ceil(log2 n) rounds; the root receives m - m_root in log2(n)
// messages, each rank sends its subtree's data once. Handles any counts and displacements,
// every world size, root and count. Scratch: the subtree's packed blocks (kSlotWork0).

#include "algorithms/descriptor.hpp"
#include "algorithms/engines/own_block.hpp"
#include "algorithms/engines/point_to_point.hpp"
#include "algorithms/engines/scratch_slots.hpp"
#include "core/copy_bytes.hpp"
#include "patterns/binomial_tree.hpp"
#include "patterns/ring.hpp"

#include <cstring>
#include <vector>

namespace cohort::algorithms {

namespace {

void run(const OpContext& ctx, const GatherArgs& args) {
  const std::size_t es = dtype_size(args.dtype);
  if (ctx.size == 1) {
    OwnBlock::of(args).copy_rest();
    return;
  }
  const int n = ctx.size;
  const int v = patterns::relative_rank(ctx.rank, args.root, n);
  const int extent = patterns::binomial_subtree_extent(v, n);
  auto rank_of = [&](int relative) {
    return static_cast<std::size_t>(patterns::absolute_rank(relative, args.root, n));
  };
  // packed_at[i]: byte offset of relative rank v + i in the packed subtree (i == extent: total).
  std::vector<std::size_t> packed_at(static_cast<std::size_t>(extent) + 1, 0);
  for (int i = 0; i < extent; ++i)
    packed_at[i + 1] = packed_at[i] + args.counts[rank_of(v + i)] * es;
  const auto children = patterns::binomial_children(v, n);
  constexpr std::uint32_t kStep = 0;  // one message per tree edge

  // Leaf: its block is the whole subtree.
  if (children.empty()) {
    RequestBatch to_parent(ctx);
    to_parent.send(static_cast<int>(rank_of(patterns::binomial_parent(v))), args.in, packed_at[1],
                   kStep);
    to_parent.wait();
    return;
  }

  auto* out = static_cast<std::byte*>(args.out);
  // Whether relative ranks [first, first + count) sit back to back in `out`.
  auto contiguous_in_out = [&](int first, int count) {
    for (int x = first; x + 1 < first + count; ++x)
      if (args.displs[rank_of(x)] + args.counts[rank_of(x)] != args.displs[rank_of(x + 1)])
        return false;
    return true;
  };
  std::byte* packed = ctx.scratch.get(packed_at[extent], kSlotWork0);
  std::vector<bool> staged(children.size(), false);

  // 1. Receive every child's subtree at once (they land in disjoint places).
  RequestBatch from_children(ctx);
  for (std::size_t i = 0; i < children.size(); ++i) {
    const int child = children[i];
    const int child_extent = patterns::binomial_subtree_extent(child, n);
    const std::size_t bytes = packed_at[child - v + child_extent] - packed_at[child - v];
    const int source = static_cast<int>(rank_of(child));
    if (v == 0 && contiguous_in_out(child, child_extent)) {
      from_children.recv(source, out + args.displs[rank_of(child)] * es, bytes, kStep);
    } else {
      staged[i] = true;
      from_children.recv(source, packed + packed_at[child - v], bytes, kStep);
    }
  }
  // 2. An inner rank adds its own block in front while the children's data arrives; the root
  //    copies its own into place.
  if (v != 0)
    copy_bytes(packed, args.in, packed_at[1]);
  else
    OwnBlock::of(args).copy_rest();
  from_children.wait();

  if (v != 0) {
    // 3a. Pass the packed subtree up.
    RequestBatch to_parent(ctx);
    to_parent.send(static_cast<int>(rank_of(patterns::binomial_parent(v))), packed,
                   packed_at[extent], kStep);
    to_parent.wait();
    return;
  }
  // 3b. Root: copy staged blocks to their displacements.
  for (std::size_t i = 0; i < children.size(); ++i) {
    if (!staged[i]) continue;
    const int child = children[i];
    const int child_extent = patterns::binomial_subtree_extent(child, n);
    for (int x = child; x < child + child_extent; ++x)
      copy_bytes(out + args.displs[rank_of(x)] * es, packed + packed_at[x],
                 packed_at[x + 1] - packed_at[x]);
  }
}

}  // namespace

extern const AlgorithmDescriptor gather_tree =
    describe<run>(Algorithm::Tree, "Binomial-tree gather (gatherv)");

}  // namespace cohort::algorithms
