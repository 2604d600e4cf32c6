// Single-copy reduce_scatter, for ranks of one host that may read each other's memory
// (engines/single_copy.hpp).
//
// How it works: every rank exposes its whole input (n blocks), and rank r folds block r of
// every rank's input, in rank order, into its output, a chunk at a time. Where every rank's
// input is mappable (Buffer::allocate_mappable) the fold reads the peers' blocks in place, in
// one pass with no scratch (reduce::fold_to_all); otherwise each peer's chunk is copied into
// scratch first (process_vm_readv) and folded from there. Then every rank waits until the
// others have read what they read of its input.
//
// Why: the arena (shared_memory.cpp) copies all n blocks of every input into the segment
// before anyone reduces, so each byte crosses memory twice; here each peer's block is read once,
// by the one rank that needs it. Over mappable buffers that is the ceiling of the op: each rank
// reads n blocks and writes one. Which of the two runs is the measured choice's
// (measured_choice.hpp), as for allreduce: both fold in rank order, so they give the same bits.
//
// The output may be the input's block r (in place): peers read only their own blocks of this
// rank's input, never block r. A rank after rank 1 keeps its own chunk aside first, since the
// fold's first step writes the output before its own operand is folded in.

#include "algorithms/engines/single_copy.hpp"
#include "algorithms/descriptor.hpp"
#include "algorithms/engines/peer_fold.hpp"
#include "core/stream_copy.hpp"
#include "reduce/reduce.hpp"

#include <atomic>
#include <vector>

namespace cohort::algorithms {
namespace {

std::atomic<std::uint64_t> mapped_reduce_scatter_count{0};

/// Every rank's input mapped here: fold block `me` of each in place, into the output.
void fold_mapped(const OpContext& ctx, const ReduceScatterArgs& args, SingleCopyOp& op,
                 std::size_t input_bytes) {
  const std::size_t es = dtype_size(args.dtype);
  const std::size_t block_offset = static_cast<std::size_t>(ctx.rank) * args.count * es;
  const std::vector<const std::byte*> bases = mapped_inputs(ctx, op, args.in, input_bytes);
  if (bases.empty()) return;  // a disagreement about lengths: the release throws it
  std::vector<const void*> inputs(bases.size());
  for (std::size_t r = 0; r < bases.size(); ++r) inputs[r] = bases[r] + block_offset;
  // Nobody else reads the output; in place it is the block just read, and plain stores hit it.
  const bool in_place = args.out == static_cast<const std::byte*>(args.in) + block_offset;
  const reduce::Stores stores = args.count * es >= kStreamOutputMinBytes && !in_place
                                    ? reduce::Stores::Streaming
                                    : reduce::Stores::Cached;
  void* outputs[1] = {args.out};
  reduce::fold_to_all(args.op, args.dtype, outputs, 1, inputs.data(), inputs.size(), args.count,
                      stores);
  // A peer that failed meanwhile may have had its input back (freed: zeros, or changed): the
  // sums are not trusted then, as a copy read from it would not be.
  op.check_peers();
  mapped_reduce_scatter_count.fetch_add(1, std::memory_order_relaxed);
}

void run(const OpContext& ctx, const ReduceScatterArgs& args) {
  const std::size_t input_bytes =
      static_cast<std::size_t>(ctx.size) * args.count * dtype_size(args.dtype);
  SingleCopyOp op(ctx, *ctx.arena());
  const ExposedBlock input{args.in, input_bytes};
  op.expose({&input, 1});
  if (args.count != 0) {
    const std::size_t block_offset =
        static_cast<std::size_t>(ctx.rank) * args.count * dtype_size(args.dtype);
    if (op.all_mappable(1))
      fold_mapped(ctx, args, op, input_bytes);
    else
      fold_copied_from_peers(ctx, op, args.op, args.dtype, static_cast<std::byte*>(args.out),
                             static_cast<const std::byte*>(args.in) + block_offset, args.count,
                             input_bytes, block_offset);
  }
  // Peers read this rank's input until they are done: wait for them before returning it.
  op.release_after_all();
}

}  // namespace

std::uint64_t testing::mapped_reduce_scatters() noexcept {
  return mapped_reduce_scatter_count.load(std::memory_order_relaxed);
}

extern const AlgorithmDescriptor reduce_scatter_single_copy =
    describe<run, reading_peers<ReduceScatterArgs>>(
        Algorithm::SingleCopy,
        "Single-copy reduce_scatter: each rank folds its block of every rank's input, read in "
        "place where mappable");

}  // namespace cohort::algorithms
