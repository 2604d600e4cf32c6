// Binomial-tree scatter (scatterv).
//
// How it works: the mirror of gather_tree. Relative rank v's subtree is [v, v + extent). The
// root sends each child, deepest subtree first, the blocks of that child's subtree as one
// message: straight from `in` when they are back to back there in relative order, otherwise
// packed into scratch first. An inner rank receives its subtree packed, keeps the first block
// (its own) and forwards the rest the same way; a leaf receives its block straight into `out`.
//
// Cost, n ranks, total m bytes: ceil(log2 n) rounds; the root sends m - m_root in log2(n)
// messages. Handles any counts and displacements, every world size, root and count.
// Scratch: the packed subtree (kSlotWork0).

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

void run(const OpContext& ctx, const ScatterArgs& args) {
  const std::size_t es = dtype_size(args.dtype);
  const int n = ctx.size;
  const int v = patterns::relative_rank(ctx.rank, args.root, n);
  const auto* in = static_cast<const std::byte*>(args.in);
  auto* out = static_cast<std::byte*>(args.out);
  auto rank_of = [&](int relative) {
    return static_cast<std::size_t>(patterns::absolute_rank(relative, args.root, n));
  };
  if (v == 0) OwnBlock::of(args).copy_rest();
  if (n == 1) return;
  const int extent = patterns::binomial_subtree_extent(v, n);
  // packed_at[i]: byte offset of relative rank v + i in the packed subtree (i == extent: total).
  std::vector<std::size_t> packed_at(static_cast<std::size_t>(extent) + 1, 0);
  for (int i = 0; i < extent; ++i)
    packed_at[i + 1] = packed_at[i] + args.counts[rank_of(v + i)] * es;
  const auto children = patterns::binomial_children(v, n);
  constexpr std::uint32_t kStep = 0;  // one message per tree edge
  const int parent = v == 0 ? -1 : static_cast<int>(rank_of(patterns::binomial_parent(v)));

  // Leaf: receive its block straight into place.
  if (children.empty()) {
    RequestBatch from_parent(ctx);
    from_parent.recv(parent, out, packed_at[1], kStep);
    from_parent.wait();
    return;
  }
  std::byte* packed = ctx.scratch.get(packed_at[extent], kSlotWork0);
  // Where relative rank x's block is on this rank: the root reads `in`, others their packed copy.
  auto source_of = [&](int x) -> const std::byte* {
    return v == 0 ? in + args.displs[rank_of(x)] * es : packed + packed_at[x - v];
  };
  // 1. An inner rank receives its packed subtree and keeps its own block.
  if (v != 0) {
    RequestBatch from_parent(ctx);
    from_parent.recv(parent, packed, packed_at[extent], kStep);
    from_parent.wait();
    copy_bytes(out, packed, packed_at[1]);
  }
  // 2. Send each child its subtree's blocks, deepest subtree first; on the root, pack them first
  //    unless they are already back to back in relative order.
  RequestBatch to_children(ctx);
  for (auto it = children.rbegin(); it != children.rend(); ++it) {
    const int child = *it;
    const int child_extent = patterns::binomial_subtree_extent(child, n);
    const std::size_t bytes = packed_at[child - v + child_extent] - packed_at[child - v];
    const std::byte* data = source_of(child);
    if (v == 0) {
      bool contiguous = true;
      for (int x = child; x + 1 < child + child_extent; ++x)
        contiguous = contiguous && args.displs[rank_of(x)] + args.counts[rank_of(x)] ==
                                       args.displs[rank_of(x + 1)];
      if (!contiguous) {
        for (int x = child; x < child + child_extent; ++x)
          copy_bytes(packed + packed_at[x], source_of(x), packed_at[x + 1] - packed_at[x]);
        data = packed + packed_at[child];
      }
    }
    to_children.send(static_cast<int>(rank_of(child)), data, bytes, kStep);
  }
  to_children.wait();
}

}  // namespace

extern const AlgorithmDescriptor scatter_tree =
    describe<run>(Algorithm::Tree, "Binomial-tree scatter (scatterv)");

}  // namespace cohort::algorithms
