// Rabenseifner's allreduce: a recursive-halving reduce-scatter followed by a recursive-doubling
// allgather.
//
// How it works: the p active ranks (p = largest power of two <= n; extra ranks fold into a
// partner first and get the result back at the end, see patterns/power_of_two_fold.hpp) split
// the vector into p balanced blocks. Halving: in the round with distance d = p/2, p/4, ..., 1,
// each rank keeps the half of its current range that holds its own block, sends the other half
// to its partner (rank xor d) and reduces the partner's copy of the kept half into it
// (out = current op received: the first round reads `in` directly, so `in` is never copied).
// After log2(p) rounds new rank v holds the complete block v. Doubling then runs the same
// partners in reverse, each round swapping the ranges gathered so far, until every rank has all.
//
// Cost, m bytes: 2 log2(p) rounds (+2 to fold/unfold when n != p); each rank sends and receives
// 2 (p - 1)/p * m bytes and reduces (p - 1)/p * m: ring's bandwidth with log latency. The
// extra ranks' fold costs one full-vector transfer each way. The selection table uses it for
// middle sizes. Accepts every world size and count. Scratch: one vector (kSlotWork0).

#include "algorithms/descriptor.hpp"
#include "algorithms/engines/allreduce_fold.hpp"
#include "algorithms/engines/point_to_point.hpp"
#include "algorithms/engines/scratch_slots.hpp"
#include "core/check.hpp"
#include "core/copy_bytes.hpp"
#include "patterns/block_partition.hpp"
#include "patterns/power_of_two_fold.hpp"
#include "reduce/reduce.hpp"

#include <cstring>

namespace cohort::algorithms {

namespace {

void run(const OpContext& ctx, const AllreduceArgs& args) {
  const std::size_t es = dtype_size(args.dtype);
  const std::size_t bytes = args.count * es;
  const auto* in = static_cast<const std::byte*>(args.in);
  auto* out = static_cast<std::byte*>(args.out);
  if (ctx.size == 1 || args.count == 0) {
    if (out != in && bytes > 0) copy_bytes(out, in, bytes);
    return;
  }
  const auto fold = patterns::fold_position(ctx.rank, ctx.size);
  const auto pof2 = static_cast<std::size_t>(fold.pof2);
  // Element offset where new rank v's block starts (v == pof2 gives count).
  auto block_start = [&](int v) {
    return patterns::balanced_offset(args.count, pof2, static_cast<std::size_t>(v));
  };
  std::byte* incoming = ctx.scratch.get(bytes, kSlotWork0);
  // Fold (non-powers of two): an extra rank is done once its partner sent the result back.
  const std::byte* current = allreduce_fold_in(ctx, args, fold, incoming);
  if (current == nullptr) return;

  const int v = fold.new_rank;
  std::uint32_t step = kFoldFirstRoundStep;
  // Reduce-scatter by recursive halving: send the half we give up, reduce the half we keep.
  for (int mask = fold.pof2 / 2; mask >= 1; mask /= 2, ++step) {
    const auto split = patterns::halving_split(v, mask);
    const int partner = patterns::fold_active_rank(v ^ mask, ctx.size);
    const std::size_t keep = block_start(split.keep_begin);
    const std::size_t keep_count = block_start(split.keep_end) - keep;
    const std::size_t give = block_start(split.send_begin);
    const std::size_t give_count = block_start(split.send_end) - give;
    exchange(ctx, partner, current + give * es, give_count * es, partner, incoming + keep * es,
             keep_count * es, step);
    reduce::reduce_to(args.op, args.dtype, out + keep * es, current + keep * es,
                      incoming + keep * es, keep_count);
    current = out;
  }
  COHORT_CHECK(current == out);  // size >= 2 means at least one round ran

  // Allgather by recursive doubling: swap the 2^k complete blocks gathered so far.
  for (int mask = 1; mask < fold.pof2; mask *= 2, ++step) {
    const int partner = patterns::fold_active_rank(v ^ mask, ctx.size);
    const int mine = v & ~(mask - 1);
    const int theirs = mine ^ mask;
    const std::size_t mine_at = block_start(mine);
    const std::size_t theirs_at = block_start(theirs);
    exchange(ctx, partner, out + mine_at * es, (block_start(mine + mask) - mine_at) * es, partner,
             out + theirs_at * es, (block_start(theirs + mask) - theirs_at) * es, step);
  }

  // Unfold: partners return the result to their extra rank.
  allreduce_unfold(ctx, args, fold);
}

}  // namespace

extern const AlgorithmDescriptor allreduce_rabenseifner =
    describe<run>(Algorithm::Rabenseifner,
                  "Rabenseifner's allreduce: a recursive-halving reduce-scatter followed by a "
                  "recursive-doubling");

}  // namespace cohort::algorithms
