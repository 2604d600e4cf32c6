// Recursive-halving reduce-scatter, for small and middle sizes on any world size.
//
// How it works: the p active ranks (p = largest power of two <= n) each stand for one or two
// consecutive old ranks (an extra rank first sends its whole input to its partner, which reduces
// it in; see patterns/power_of_two_fold.hpp), so new rank v owns the blocks of old ranks
// [first_old(v), first_old(v + 1)), contiguous in `in`. In the round with distance
// d = p/2, ..., 1, each rank keeps the half of its current range of new ranks that contains it,
// sends the other half to partner v xor d and reduces the partner's copy of its half into its
// own. After log2(p) rounds it holds its own block, written straight into `out` by the last
// round, and a partner's extra block, which it sends back to the extra rank.
//
// Cost, n ranks, count c per rank: log2(p) rounds (+2 when n != p), each rank sending, receiving
// and reducing about (p - 1)/p * n * c elements: log latency with ring-like bandwidth; the fold
// costs the extra ranks one full-input transfer. Accepts every world size and count, and out
// aliasing in's block `rank`. Scratch: partial results and one receive buffer (kSlotWork0/1).

#include "algorithms/descriptor.hpp"
#include "algorithms/engines/point_to_point.hpp"
#include "algorithms/engines/scratch_slots.hpp"
#include "core/copy_bytes.hpp"
#include "patterns/power_of_two_fold.hpp"
#include "reduce/reduce.hpp"

#include <cstring>

namespace cohort::algorithms {

namespace {

void run(const OpContext& ctx, const ReduceScatterArgs& args) {
  const std::size_t es = dtype_size(args.dtype);
  const std::size_t block_bytes = args.count * es;
  const auto* in = static_cast<const std::byte*>(args.in);
  auto* out = static_cast<std::byte*>(args.out);
  const auto me = static_cast<std::size_t>(ctx.rank);
  if (args.count == 0) return;
  if (ctx.size == 1) {
    if (out != in) copy_bytes(out, in, block_bytes);
    return;
  }
  const std::size_t total = static_cast<std::size_t>(ctx.size) * args.count;
  const auto fold = patterns::fold_position(ctx.rank, ctx.size);
  // Element offset of new rank v's first block (v == pof2 gives total).
  auto start_of = [&](int v) {
    return static_cast<std::size_t>(patterns::fold_first_old_rank(v, ctx.size)) * args.count;
  };
  constexpr std::uint32_t kFoldStep = 0;
  constexpr std::uint32_t kUnfoldStep = 1;
  constexpr std::uint32_t kFirstRoundStep = 2;

  // Fold: an extra rank hands its whole input to its partner and gets its block back at the end.
  if (fold.role == patterns::FoldRole::Extra) {
    // In place, the result lands where the input is read from: finish sending first.
    RequestBatch batch(ctx);
    batch.send(fold.partner, in, total * es, kFoldStep);
    batch.wait();
    batch.recv(fold.partner, out, block_bytes, kUnfoldStep);
    batch.wait();
    return;
  }
  std::byte* partial = ctx.scratch.get(total * es, kSlotWork0);
  std::byte* incoming = ctx.scratch.get(total * es, kSlotWork1);
  const std::byte* current = in;
  if (fold.role == patterns::FoldRole::Partner) {
    RequestBatch batch(ctx);
    batch.recv(fold.partner, incoming, total * es, kFoldStep);
    batch.wait();
    reduce::reduce_to(args.op, args.dtype, partial, in, incoming, total);
    current = partial;
  }

  const int v = fold.new_rank;
  std::uint32_t step = kFirstRoundStep;
  for (int mask = fold.pof2 / 2; mask >= 1; mask /= 2, ++step) {
    const auto split = patterns::halving_split(v, mask);
    const int partner = patterns::fold_active_rank(v ^ mask, ctx.size);
    const std::size_t keep = start_of(split.keep_begin);
    const std::size_t keep_end = start_of(split.keep_end);
    const std::size_t give = start_of(split.send_begin);
    const std::size_t give_end = start_of(split.send_end);
    // 1. Swap halves: ours goes to the partner, the partner's copy of what we keep comes back.
    exchange(ctx, partner, current + give * es, (give_end - give) * es, partner,
             incoming + keep * es, (keep_end - keep) * es, step);
    // 2. Reduce the kept half. In the last round it is exactly our old ranks' blocks: ours goes
    //    straight to `out`, a folded extra rank's stays in `partial` to be sent back.
    if (mask == 1) {
      const std::size_t mine = me * args.count;
      reduce::reduce_to(args.op, args.dtype, out, current + mine * es, incoming + mine * es,
                        args.count);
      if (fold.role == patterns::FoldRole::Partner) {
        const std::size_t extra = static_cast<std::size_t>(fold.partner) * args.count;
        reduce::reduce_to(args.op, args.dtype, partial + extra * es, current + extra * es,
                          incoming + extra * es, args.count);
      }
    } else {
      reduce::reduce_to(args.op, args.dtype, partial + keep * es, current + keep * es,
                        incoming + keep * es, keep_end - keep);
    }
    current = partial;
  }

  // Unfold: hand the extra rank its block.
  if (fold.role == patterns::FoldRole::Partner) {
    RequestBatch batch(ctx);
    batch.send(fold.partner, partial + static_cast<std::size_t>(fold.partner) * block_bytes,
               block_bytes, kUnfoldStep);
    batch.wait();
  }
}

}  // namespace

extern const AlgorithmDescriptor reduce_scatter_recursive_halving =
    describe<run>(Algorithm::RecursiveHalving,
                  "Recursive-halving reduce-scatter, for small and middle sizes on any world size");

}  // namespace cohort::algorithms
