// Single-copy reduce, for ranks of one host that may read each other's memory
// (engines/single_copy.hpp).
//
// How it works: every rank exposes its input, and the root its output too. Where every rank's
// input and the root's output are mappable (Buffer::allocate_mappable), the ranks share the work
// as the mapped allreduce does: rank r folds share r of every input, read in place, straight
// into share r of the root's output, in one pass (reduce::fold_to_all), checking its peers
// before each piece it writes. Otherwise the root alone folds every input, a chunk at a time,
// each peer's chunk copied into scratch first (process_vm_readv), as the arena's root scheme
// does up to 4 ranks but with one copy instead of two; the others wait until it has read them.
//
// Why: over mappable memory each input byte is read once, by the rank whose share it is, and
// each output byte written once; the arena copies every input into the segment first. Which of
// the two runs is the measured choice's (measured_choice.hpp): both fold in rank order, so they
// give the same bits.
//
// In place (the root's output is its input): rank r reads share r of the root's input and then
// writes share r of its output, nobody else touches that share, and the fold reads each block
// of its inputs before it writes it. On the copying path the root keeps its own chunk aside
// first when it is rank 2 or later (rank_order_fold.hpp).

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

std::atomic<std::uint64_t> mapped_reduce_count{0};

/// Every rank's input and the root's output mapped here: fold share `me` of every input into
/// the root's output. False, having done nothing, where a length disagreed (the release throws).
bool fold_mapped(const OpContext& ctx, const ReduceArgs& args, SingleCopyOp& op,
                 std::size_t bytes) {
  const std::size_t es = dtype_size(args.dtype);
  const auto n = static_cast<std::size_t>(ctx.size);
  const std::vector<const std::byte*> inputs = mapped_inputs(ctx, op, args.in, bytes);
  if (inputs.empty()) return false;
  std::byte* output =
      ctx.rank == args.root ? static_cast<std::byte*>(args.out) : op.mapped(args.root, 1, bytes);
  if (output == nullptr) return false;
  const patterns::BlockRange mine =
      patterns::balanced_block(args.count, n, static_cast<std::size_t>(ctx.rank));
  const std::size_t chunk_elems = std::max<std::size_t>(kPeerFoldChunkBytes / es, 1);
  // In place (the root's output is its input: the same file and offset, so the same address
  // here on every rank) the fold has just read every line it writes, and plain stores hit the
  // cache; out of place only a large output goes past it.
  const bool in_place = output == inputs[static_cast<std::size_t>(args.root)];
  const reduce::Stores stores = bytes >= kStreamOutputMinBytes && !in_place
                                    ? reduce::Stores::Streaming
                                    : reduce::Stores::Cached;
  std::vector<const void*> pieces(n);
  for (std::size_t done = 0; done < mine.count; done += chunk_elems) {
    const std::size_t elems = std::min(chunk_elems, mine.count - done);
    const std::size_t offset = (mine.offset + done) * es;
    for (std::size_t r = 0; r < n; ++r) pieces[r] = inputs[r] + offset;
    // A root that failed may have its output back: write nothing more into it.
    op.check_peers();
    void* into[1] = {output + offset};
    reduce::fold_to_all(args.op, args.dtype, into, 1, pieces.data(), n, elems, stores);
  }
  // The inputs were read in place: a peer that failed meanwhile may have changed its own.
  op.check_peers();
  return true;
}

void run(const OpContext& ctx, const ReduceArgs& args) {
  const std::size_t bytes = args.count * dtype_size(args.dtype);
  const bool root = ctx.rank == args.root;
  SingleCopyOp op(ctx, *ctx.arena());
  // The root's output is exposed too: where every rank's buffers are mappable, the ranks write
  // their shares of it in place.
  const ExposedBlock blocks[2] = {{args.in, bytes}, {root ? args.out : nullptr, root ? bytes : 0}};
  op.expose(blocks);
  if (bytes != 0 && op.all_mappable(2)) {
    if (fold_mapped(ctx, args, op, bytes))
      mapped_reduce_count.fetch_add(1, std::memory_order_relaxed);
    // The root's output is written by every rank: nobody returns before all are done.
    op.release_after_all();
    return;
  }
  // The root folds every rank's input, each peer's chunk read into scratch first.
  if (root && bytes != 0)
    fold_copied_from_peers(ctx, op, args.op, args.dtype, static_cast<std::byte*>(args.out),
                           static_cast<const std::byte*>(args.in), args.count, bytes, 0);
  // Only the root reads: the others wait until it is done with their inputs.
  if (root)
    op.release();
  else
    op.release_after(args.root);
}

}  // namespace

std::uint64_t testing::mapped_reduces() noexcept {
  return mapped_reduce_count.load(std::memory_order_relaxed);
}

extern const AlgorithmDescriptor reduce_single_copy = describe<run, reading_peers<ReduceArgs>>(
    Algorithm::SingleCopy,
    "Single-copy reduce: the ranks fold their shares into the root's output in place where "
    "every buffer is mappable, else the root folds every input read out of its owner");

}  // namespace cohort::algorithms
