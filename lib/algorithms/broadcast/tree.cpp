// Binomial-tree broadcast.
//
// How it works: ranks are numbered relative to the root (patterns/binomial_tree.hpp). Every
// non-root rank receives the whole message from its parent, then forwards it to its children,
// the child with the largest subtree first so the longest chain starts earliest. An
// out-of-place root sends from its input and copies it into its output while the sends are in
// flight.
//
// Cost, n ranks, m bytes: ceil(log2 n) rounds on the critical path, each moving m bytes; the
// root sends ceil(log2 n) * m. Latency-optimal; for large m the scatter + allgather broadcast
// moves less per rank. Accepts every world size, root and count.

#include "algorithms/broadcast/root_input.hpp"
#include "algorithms/descriptor.hpp"
#include "algorithms/engines/point_to_point.hpp"
#include "patterns/binomial_tree.hpp"
#include "patterns/ring.hpp"

namespace cohort::algorithms {

namespace {

void run(const OpContext& ctx, const BroadcastArgs& args) {
  const std::size_t bytes = args.count * dtype_size(args.dtype);
  if (ctx.size == 1 || bytes == 0) {
    if (ctx.rank == args.root) copy_root_input(args);
    return;
  }
  const int v = patterns::relative_rank(ctx.rank, args.root, ctx.size);
  constexpr std::uint32_t kStep = 0;  // one message per tree edge: one step suffices

  // 1. Everyone but the root receives the message from its parent.
  if (v != 0) {
    RequestBatch from_parent(ctx);
    from_parent.recv(patterns::absolute_rank(patterns::binomial_parent(v), args.root, ctx.size),
                     args.out, bytes, kStep);
    from_parent.wait();
  }
  // 2. Forward to the children, deepest subtree first (the root from its input).
  const void* data = v == 0 ? args.in : args.out;
  const auto children = patterns::binomial_children(v, ctx.size);
  RequestBatch to_children(ctx);
  for (auto child = children.rbegin(); child != children.rend(); ++child)
    to_children.send(patterns::absolute_rank(*child, args.root, ctx.size), data, bytes, kStep);
  if (v == 0) copy_root_input(args);  // reads the input the sends read too
  to_children.wait();
}

}  // namespace

extern const AlgorithmDescriptor broadcast_tree =
    describe<run>(Algorithm::Tree, "Binomial-tree broadcast");

}  // namespace cohort::algorithms
