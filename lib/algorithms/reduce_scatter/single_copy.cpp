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
#include "algorithms/engines/rank_order_fold.hpp"
#include "algorithms/engines/scratch_slots.hpp"
#include "core/copy_bytes.hpp"
#include "core/stream_copy.hpp"
#include "reduce/reduce.hpp"

#include <algorithm>
#include <atomic>
#include <vector>

namespace cohort::algorithms {
namespace {

/// Bytes of one block folded at once: a chunk from every rank and the output's stay in cache.
constexpr std::size_t kChunkBytes = 128 * 1024;

std::atomic<std::uint64_t> mapped_reduce_scatter_count{0};

/// Every rank's input mapped here: fold block `me` of each in place, into the output.
void fold_mapped(const OpContext& ctx, const ReduceScatterArgs& args, SingleCopyOp& op,
                 std::size_t input_bytes) {
  const std::size_t es = dtype_size(args.dtype);
  const auto n = static_cast<std::size_t>(ctx.size);
  const std::size_t block_offset = static_cast<std::size_t>(ctx.rank) * args.count * es;
  std::vector<const void*> inputs(n);
  for (std::size_t r = 0; r < n; ++r) {
    const std::byte* base = static_cast<int>(r) == ctx.rank
                                ? static_cast<const std::byte*>(args.in)
                                : op.mapped(static_cast<int>(r), 0, input_bytes);
    if (base == nullptr) return;  // a disagreement about lengths: the release throws it
    inputs[r] = base + block_offset;
  }
  // Nobody else reads the output; in place it is the block just read, and plain stores hit it.
  const bool in_place = args.out == static_cast<const std::byte*>(args.in) + block_offset;
  const reduce::Stores stores = args.count * es >= kStreamOutputMinBytes && !in_place
                                    ? reduce::Stores::Streaming
                                    : reduce::Stores::Cached;
  void* outputs[1] = {args.out};
  reduce::fold_to_all(args.op, args.dtype, outputs, 1, inputs.data(), n, args.count, stores);
  // A peer that failed meanwhile may have had its input back (freed: zeros, or changed): the
  // sums are not trusted then, as a copy read from it would not be.
  op.check_peers();
  mapped_reduce_scatter_count.fetch_add(1, std::memory_order_relaxed);
}

/// Reads each peer's chunk of block `me` into scratch and folds it into the output.
void fold_copied(const OpContext& ctx, const ReduceScatterArgs& args, SingleCopyOp& op,
                 std::size_t input_bytes) {
  const std::size_t es = dtype_size(args.dtype);
  const auto* in = static_cast<const std::byte*>(args.in);
  auto* out = static_cast<std::byte*>(args.out);
  const std::size_t block_offset = static_cast<std::size_t>(ctx.rank) * args.count * es;
  const std::size_t chunk_elems = std::max<std::size_t>(kChunkBytes / es, 1);
  std::byte* first = ctx.scratch.get(kChunkBytes, kSlotWork0);
  std::byte* second = ctx.scratch.get(kChunkBytes, kSlotWork1);
  const bool keep_own = own_operand_needs_keeping(out == in + block_offset, ctx.rank);
  std::byte* own_copy = keep_own ? ctx.scratch.get(kChunkBytes, kSlotWork2) : nullptr;
  for (std::size_t done = 0; done < args.count; done += chunk_elems) {
    const std::size_t elems = std::min(chunk_elems, args.count - done);
    const std::size_t offset = block_offset + done * es;
    if (keep_own) copy_bytes(own_copy, in + offset, elems * es);
    fold_in_rank_order(args.op, args.dtype, out + done * es, elems, ctx.size,
                       [&](int r) -> const std::byte* {
                         if (r == ctx.rank) return keep_own ? own_copy : in + offset;
                         // Rank 1's operand into its own scratch: rank 0's is still in use.
                         std::byte* into = r == 1 ? second : first;
                         op.read_part(r, 0, input_bytes, offset, into, elems * es);
                         return into;
                       });
  }
}

void run(const OpContext& ctx, const ReduceScatterArgs& args) {
  const std::size_t input_bytes =
      static_cast<std::size_t>(ctx.size) * args.count * dtype_size(args.dtype);
  SingleCopyOp op(ctx, *ctx.arena());
  const ExposedBlock input{args.in, input_bytes};
  op.expose({&input, 1});
  if (args.count != 0) {
    if (op.all_mappable(1))
      fold_mapped(ctx, args, op, input_bytes);
    else
      fold_copied(ctx, args, op, input_bytes);
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
