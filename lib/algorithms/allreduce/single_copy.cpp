// Single-copy allreduce, for ranks of one host that may read each other's memory
// (engines/single_copy.hpp).
//
// How it works, in two steps of the engine:
// - Reduce-scatter: every rank exposes its input. Rank r owns share r of the vector (balanced
//   blocks) and reduces it chunk by chunk: the other ranks' parts of the chunk are copied out of
//   their inputs into scratch that stays in this core's cache, and all operands are combined in
//   rank order (its own read straight from its input) into its output.
// - Allgather: every rank exposes its output, which announces that it has read every input it
//   needed; each rank then copies every other share out of its owner's output.
// Every element is reduced once, by its share's owner, so all ranks hold identical bits.
// Where every rank's input and output are mappable memory (Buffer::allocate_mappable), one step
// does both (run_mapped): each rank reads its share of every input in place and writes the sums
// into every output, as threads of one process would.
//
// Why: the arena's share scheme (shared_memory_reduction.cpp) copies each rank's input into the
// segment, reduces into a result slot and copies every result out, each through memory. Here a
// peer's part is read into cache and reduced there, and the other shares are copied once: from
// a few MiB on, where the vector no longer fits the caches, that was 1.5-1.8x faster on 2 ranks
// (buffers of 2 MiB pages; tied on 4 KiB pages; bench/PERFORMANCE-LOG.md, single-copy allreduce).
//
// In place (out == in) no rank writes anything a peer still reads: in the first step a rank
// writes only its own share of its buffer, which nobody else reads from it, and it overwrites
// the others' shares only after every peer has announced the second step. A rank after rank 1
// keeps its own part of each chunk in scratch first, since the first two operands land in its
// output before its own is folded in.

#include "algorithms/engines/single_copy.hpp"
#include "algorithms/descriptor.hpp"
#include "algorithms/engines/peer_fold.hpp"
#include "core/stream_copy.hpp"
#include "patterns/block_partition.hpp"
#include "reduce/reduce.hpp"

#include <algorithm>
#include <atomic>
#include <vector>

namespace cohort::algorithms {
namespace {

std::atomic<std::uint64_t> mapped_allreduce_count{0};
std::atomic<void (*)(int, std::size_t)> mapped_piece_hook{nullptr};

/// Every rank's input and output mapped here (all_mappable): rank r folds share r of every
/// input and writes the result into share r of every output in one pass (reduce::fold_to_all),
/// a chunk at a time so that a failed peer stops it between chunks. Each element is read once
/// from each input and written once into each output, and no rank touches another's share of
/// any buffer, so in place needs nothing kept aside.
void run_mapped(const OpContext& ctx, const AllreduceArgs& args, SingleCopyOp& op) {
  const std::size_t es = dtype_size(args.dtype);
  const int n = ctx.size;
  const std::size_t bytes = args.count * es;
  const std::vector<const std::byte*> inputs = mapped_inputs(ctx, op, args.in, bytes);
  std::vector<std::byte*> outputs(static_cast<std::size_t>(n));
  bool agreed = !inputs.empty();
  for (int r = 0; r < n && agreed; ++r) {
    outputs[static_cast<std::size_t>(r)] =
        r == ctx.rank ? static_cast<std::byte*>(args.out) : op.mapped(r, 1, bytes);
    agreed = outputs[static_cast<std::size_t>(r)] != nullptr;
  }
  if (agreed) {
    const patterns::BlockRange mine = patterns::balanced_block(
        args.count, static_cast<std::size_t>(n), static_cast<std::size_t>(ctx.rank));
    const std::size_t chunk_elems = std::max<std::size_t>(kPeerFoldChunkBytes / es, 1);
    // In place, the fold has just read every output line it writes: plain stores hit the cache.
    const reduce::Stores stores = bytes >= kStreamOutputMinBytes && args.in != args.out
                                      ? reduce::Stores::Streaming
                                      : reduce::Stores::Cached;
    std::vector<const void*> pieces_in(static_cast<std::size_t>(n));
    std::vector<void*> pieces_out(static_cast<std::size_t>(n));
    for (std::size_t done = 0; done < mine.count; done += chunk_elems) {
      const std::size_t elems = std::min(chunk_elems, mine.count - done);
      const std::size_t offset = (mine.offset + done) * es;
      // Own output last: the peers' lines leave this core's cache, its own may stay.
      for (int k = 0; k < n; ++k) {
        const auto i = static_cast<std::size_t>(k);
        pieces_in[i] = inputs[i] + offset;
        pieces_out[i] = outputs[static_cast<std::size_t>((ctx.rank + 1 + k) % n)] + offset;
      }
      if (auto* hook = mapped_piece_hook.load(std::memory_order_relaxed))
        hook(ctx.rank, done / chunk_elems);
      // A peer that failed may have its buffers back: write nothing more into them.
      op.check_peers();
      // Inputs in rank order, so every rank's share folds as fold_in_rank_order would.
      reduce::fold_to_all(args.op, args.dtype, pieces_out.data(), pieces_out.size(),
                          pieces_in.data(), pieces_in.size(), elems, stores);
    }
  }
  if (agreed) mapped_allreduce_count.fetch_add(1, std::memory_order_relaxed);
  // The second step reads nothing; announcing it keeps the generations of the copying scheme.
  op.expose_next({});
  op.release_after_all();
}

void run(const OpContext& ctx, const AllreduceArgs& args) {
  const std::size_t es = dtype_size(args.dtype);
  const auto n = static_cast<std::size_t>(ctx.size);
  const auto me = static_cast<std::size_t>(ctx.rank);
  const std::size_t bytes = args.count * es;
  const auto* in = static_cast<const std::byte*>(args.in);
  auto* out = static_cast<std::byte*>(args.out);
  SingleCopyOp op(ctx, *ctx.arena(), 2);
  // The output is exposed from the start too: where every rank's buffers are mappable, the
  // ranks write each other's outputs in place.
  const ExposedBlock blocks[2] = {{args.in, bytes}, {args.out, bytes}};
  op.expose(blocks);
  if (op.all_mappable(2)) {
    run_mapped(ctx, args, op);
    return;
  }

  // 1. This rank's share, each peer's part copied out of its input.
  const patterns::BlockRange mine = patterns::balanced_block(args.count, n, me);
  fold_copied_from_peers(ctx, op, args.op, args.dtype, out + mine.offset * es,
                         in + mine.offset * es, mine.count, bytes, mine.offset * es);

  // 2. Every other share, out of its owner's output, from the next rank on.
  const ExposedBlock output{args.out, bytes};
  op.expose_next({&output, 1});
  for (std::size_t k = 1; k < n; ++k) {
    const std::size_t owner = (me + k) % n;
    const patterns::BlockRange share = patterns::balanced_block(args.count, n, owner);
    op.read_part(static_cast<int>(owner), 0, bytes, share.offset * es, out + share.offset * es,
                 share.count * es);
  }
  op.release_after_all();
}

}  // namespace

std::uint64_t testing::mapped_allreduces() noexcept {
  return mapped_allreduce_count.load(std::memory_order_relaxed);
}

void testing::set_mapped_piece_hook(void (*hook)(int, std::size_t)) noexcept {
  mapped_piece_hook.store(hook, std::memory_order_relaxed);
}

extern const AlgorithmDescriptor allreduce_single_copy =
    describe<run, reading_peers<AllreduceArgs>>(
        Algorithm::SingleCopy,
        "Single-copy allreduce: each rank reduces its share out of the others' inputs, then "
        "copies the other shares out of their owners");

}  // namespace cohort::algorithms
