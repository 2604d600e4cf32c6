#pragma once

// The folds the single-copy reducing algorithms share (allreduce, reduce and reduce_scatter in
// <family>/single_copy.cpp): every rank's operand folded in rank order (rank_order_fold.hpp),
// the peers' operands taken from what they exposed as entry 0 of their tables
// (engines/single_copy.hpp), either copied out of them a chunk at a time or read in place where
// every rank's memory is mappable.

#include "algorithms/engines/single_copy.hpp"
#include "algorithms/op_context.hpp"

#include <cohort/dtype.hpp>

#include <cstddef>
#include <vector>

namespace cohort::algorithms {

/// Elements folded at once: a 128 KiB chunk from two peers and this rank's own stay in the
/// core's cache while they are reduced, and an op that writes a peer's memory checks its peers
/// once per chunk.
inline constexpr std::size_t kPeerFoldChunkBytes = 128 * 1024;

/// dst[i] = operand(0)[i] op ... op operand(n - 1)[i] for i < count, where operand(r) is `own`
/// for this rank and bytes [offset, offset + count * dtype size) of rank r's entry 0 (which
/// must hold `entry_bytes`, else the release throws the disagreement) for every peer, copied
/// into scratch slots kSlotWork0-2 a chunk at a time. `own` may be `dst` (in place): it is kept
/// aside first where the fold would overwrite it before its turn.
void fold_copied_from_peers(const OpContext& ctx, SingleCopyOp& op, ReduceOp reduce_op, DType dtype,
                            std::byte* dst, const std::byte* own, std::size_t count,
                            std::size_t entry_bytes, std::size_t offset);

/// Entry 0 of every rank's table as an address here, `entry_bytes` long: `own` for this rank,
/// the peer's mappable memory mapped here (SingleCopyOp::mapped) for the others. Only where
/// all_mappable() said so. Empty where some entry's length disagreed (the release throws it)
/// or is empty (entry_bytes 0: nothing to fold).
std::vector<const std::byte*> mapped_inputs(const OpContext& ctx, SingleCopyOp& op, const void* own,
                                            std::size_t entry_bytes);

}  // namespace cohort::algorithms
