// Recursive-doubling allreduce: every round, each rank swaps its whole vector with the partner
// at distance 2^k and reduces.
//
// How it works: on a power of two, after round k every rank holds the reduction over its
// 2^(k+1)-rank group, so log2(n) rounds finish. Other world sizes fold first
// (patterns/power_of_two_fold.hpp): each extra rank sends its vector to its partner, which
// reduces it in and takes part for both; at the end the partner sends the result back. The
// first reduction writes `out = in op received` directly, so `in` is never copied.
// Every rank combines the same operands in the same pairing and order (the lower new rank's
// first), so all ranks get identical bits.
//
// Cost, n ranks (p = largest power of two <= n), m bytes: log2(p) rounds (+2 when n != p), each
// sending and receiving m bytes and reducing m bytes: latency-optimal, bandwidth log2(p) * m.
// The selection table uses it for small messages. Accepts every world size and count.
// Scratch: one vector (kSlotWork0).

#include "algorithms/descriptor.hpp"
#include "algorithms/engines/allreduce_fold.hpp"
#include "algorithms/engines/point_to_point.hpp"
#include "algorithms/engines/scratch_slots.hpp"
#include "core/check.hpp"
#include "core/copy_bytes.hpp"
#include "patterns/power_of_two_fold.hpp"
#include "reduce/reduce.hpp"

#include <cstring>

namespace cohort::algorithms {

namespace {

void run(const OpContext& ctx, const AllreduceArgs& args) {
  const std::size_t bytes = args.count * dtype_size(args.dtype);
  const auto* in = static_cast<const std::byte*>(args.in);
  auto* out = static_cast<std::byte*>(args.out);
  if (ctx.size == 1 || args.count == 0) {
    if (out != in && bytes > 0) copy_bytes(out, in, bytes);
    return;
  }
  const auto fold = patterns::fold_position(ctx.rank, ctx.size);
  std::byte* incoming = ctx.scratch.get(bytes, kSlotWork0);
  // Fold (non-powers of two): an extra rank is done once its partner sent the result back.
  // `current` is where this rank's running reduction lives.
  const std::byte* current = allreduce_fold_in(ctx, args, fold, incoming);
  if (current == nullptr) return;

  // Round k: swap the running reduction with the partner 2^k away (in new ranks), reduce.
  for (int round = 0; (1 << round) < fold.pof2; ++round) {
    const int partner_new = patterns::doubling_partner(fold.new_rank, round);
    const int partner = patterns::fold_active_rank(partner_new, ctx.size);
    exchange(ctx, partner, current, bytes, partner, incoming, bytes,
             kFoldFirstRoundStep + static_cast<std::uint32_t>(round));
    // Both partners put the lower new rank's vector first: the kernels are not symmetric in
    // their operands (Min/Max keep the first of equal ones, +0 against -0; a NaN's payload is
    // the first operand's), so "mine op theirs" would leave the two with different bits.
    if (fold.new_rank < partner_new)
      reduce::reduce_to(args.op, args.dtype, out, current, incoming, args.count);
    else
      reduce::reduce_to(args.op, args.dtype, out, incoming, current, args.count);
    current = out;
  }
  COHORT_CHECK(current == out);  // size >= 2 means at least one round ran

  // Unfold: partners return the result to their extra rank.
  allreduce_unfold(ctx, args, fold);
}

}  // namespace

extern const AlgorithmDescriptor allreduce_recursive_doubling = describe<run>(
    Algorithm::RecursiveDoubling,
    "Recursive-doubling allreduce: every round, each rank swaps its whole vector with the partner");

}  // namespace cohort::algorithms
