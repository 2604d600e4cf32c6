#include "algorithms/engines/peer_fold.hpp"

#include "algorithms/engines/rank_order_fold.hpp"
#include "algorithms/engines/scratch_slots.hpp"
#include "core/copy_bytes.hpp"

#include <algorithm>

namespace cohort::algorithms {

void fold_copied_from_peers(const OpContext& ctx, SingleCopyOp& op, ReduceOp reduce_op, DType dtype,
                            std::byte* dst, const std::byte* own, std::size_t count,
                            std::size_t entry_bytes, std::size_t offset) {
  const std::size_t es = dtype_size(dtype);
  const std::size_t chunk_elems = std::max<std::size_t>(kPeerFoldChunkBytes / es, 1);
  std::byte* first = ctx.scratch.get(kPeerFoldChunkBytes, kSlotWork0);
  std::byte* second = ctx.scratch.get(kPeerFoldChunkBytes, kSlotWork1);
  const bool keep_own = own_operand_needs_keeping(dst == own, ctx.rank);
  std::byte* own_copy = keep_own ? ctx.scratch.get(kPeerFoldChunkBytes, kSlotWork2) : nullptr;
  for (std::size_t done = 0; done < count; done += chunk_elems) {
    const std::size_t elems = std::min(chunk_elems, count - done);
    const std::size_t at = done * es;
    if (keep_own) copy_bytes(own_copy, own + at, elems * es);
    fold_in_rank_order(reduce_op, dtype, dst + at, elems, ctx.size, [&](int r) -> const std::byte* {
      if (r == ctx.rank) return keep_own ? own_copy : own + at;
      // Rank 1's operand into its own scratch: rank 0's is still in use.
      std::byte* into = r == 1 ? second : first;
      op.read_part(r, 0, entry_bytes, offset + at, into, elems * es);
      return into;
    });
  }
}

std::vector<const std::byte*> mapped_inputs(const OpContext& ctx, SingleCopyOp& op, const void* own,
                                            std::size_t entry_bytes) {
  std::vector<const std::byte*> inputs(static_cast<std::size_t>(ctx.size));
  for (int r = 0; r < ctx.size; ++r) {
    const std::byte* input =
        r == ctx.rank ? static_cast<const std::byte*>(own) : op.mapped(r, 0, entry_bytes);
    if (input == nullptr) return {};
    inputs[static_cast<std::size_t>(r)] = input;
  }
  return inputs;
}

}  // namespace cohort::algorithms
