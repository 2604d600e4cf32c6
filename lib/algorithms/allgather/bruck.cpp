// Bruck allgather, for small messages on any world size.
//
// How it works: rank r assembles the result rotated in a scratch buffer, slot i holding the
// block of rank r + i (its own in slot 0). In round k (distance d = 2^k) it sends slots
// [0, min(d, n - d)) to rank r - d and receives rank r + d's slots [0, min(d, n - d)) into its
// slots [d, ...): those are exactly the blocks of ranks r + d, r + d + 1, .... After
// ceil(log2 n) rounds all n slots are filled and are copied out to their displacements.
//
// Cost, n ranks, total m bytes: ceil(log2 n) rounds (recursive doubling's latency on any n),
// m - m_r bytes sent and received, plus two local copies of m. Handles allgatherv (slots are
// packed back to back in scratch, so each round is still one message), every world size and
// count. Scratch: the rotated result (kSlotWork0).

#include "patterns/bruck.hpp"
#include "algorithms/descriptor.hpp"
#include "algorithms/engines/point_to_point.hpp"
#include "algorithms/engines/scratch_slots.hpp"
#include "core/copy_bytes.hpp"

#include <cstring>
#include <vector>

namespace cohort::algorithms {

namespace {

void run(const OpContext& ctx, const AllgatherArgs& args) {
  if (ctx.size == 1) return;
  const int n = ctx.size;
  const std::size_t es = dtype_size(args.dtype);
  auto* buf = static_cast<std::byte*>(args.out);
  auto rank_at = [&](int slot) {
    return static_cast<std::size_t>(patterns::wrap(ctx.rank + slot, n));
  };
  // slot_at[i]: byte offset of slot i in the rotated buffer (slot_at[n] is the total).
  std::vector<std::size_t> slot_at(static_cast<std::size_t>(n) + 1, 0);
  for (int i = 0; i < n; ++i) slot_at[i + 1] = slot_at[i] + args.counts[rank_at(i)] * es;
  if (slot_at[n] == 0) return;
  std::byte* rotated = ctx.scratch.get(slot_at[n], kSlotWork0);

  // 1. Our own block goes to slot 0.
  copy_bytes(rotated, buf + args.displs[rank_at(0)] * es, slot_at[1]);
  // 2. Round k: pass the first min(d, n - d) slots to rank - d, receive rank + d's.
  for (int round = 0; round < patterns::bruck_rounds(n); ++round) {
    const auto r = patterns::bruck_round(ctx.rank, n, round);
    const int blocks = patterns::bruck_allgather_blocks(n, r.distance);
    exchange(ctx, r.send_to, rotated, slot_at[blocks], r.recv_from, rotated + slot_at[r.distance],
             slot_at[r.distance + blocks] - slot_at[r.distance], static_cast<std::uint32_t>(round));
  }
  // 3. Undo the rotation into the caller's layout (our own block is already there).
  for (int i = 1; i < n; ++i)
    copy_bytes(buf + args.displs[rank_at(i)] * es, rotated + slot_at[i],
               slot_at[i + 1] - slot_at[i]);
}

}  // namespace

extern const AlgorithmDescriptor allgather_bruck =
    describe<run>(Algorithm::Bruck, "Bruck allgather, for small messages on any world size");

}  // namespace cohort::algorithms
