// Bruck alltoall, for small uniform blocks.
//
// How it works: rank r first rotates its blocks so that slot i holds the block for rank r + i.
// In round k (distance d = 2^k) it packs every slot whose index has bit k set, sends them to
// rank r + d, receives the same slots from rank r - d and unpacks them in place. A block for
// rank t = s + i starting on rank s rides along exactly the set bits of i, so it reaches t after
// all rounds, still in slot i; rank r therefore finds the block from rank j in slot r - j.
//
// Cost, n ranks, block b bytes: ceil(log2 n) rounds, each moving about n/2 blocks: n/2 log2(n)
// * b bytes instead of pairwise's (n - 1) * b, for log instead of linear latency. Worth it for
// tiny blocks only. Declines alltoallv (args.uniform false). Accepts every world size and count.
// Scratch: the rotated blocks, a send pack and a receive pack (kSlotWork0/1/2).

#include "patterns/bruck.hpp"
#include "algorithms/descriptor.hpp"
#include "algorithms/engines/point_to_point.hpp"
#include "algorithms/engines/scratch_slots.hpp"
#include "core/copy_bytes.hpp"

#include <cstring>

namespace cohort::algorithms {

namespace {

bool accepts(const OpContext&, const AlltoallArgs& args) {
  return args.uniform;
}

void run(const OpContext& ctx, const AlltoallArgs& args) {
  const int n = ctx.size;
  const std::size_t es = dtype_size(args.dtype);
  const std::size_t block = args.send_counts[0] * es;
  const auto* in = static_cast<const std::byte*>(args.in);
  auto* out = static_cast<std::byte*>(args.out);
  auto rank_at = [&](int i) { return static_cast<std::size_t>(patterns::wrap(ctx.rank + i, n)); };
  if (block == 0) return;
  if (n == 1) {
    if (!args.own_block_in_place)
      copy_bytes(out + args.recv_displs[0] * es, in + args.send_displs[0] * es, block);
    return;
  }
  const std::size_t all = static_cast<std::size_t>(n) * block;
  std::byte* rotated = ctx.scratch.get(all, kSlotWork0);
  std::byte* outgoing = ctx.scratch.get(all, kSlotWork1);
  std::byte* incoming = ctx.scratch.get(all, kSlotWork2);

  // 1. Rotate: slot i holds our block for rank r + i.
  // (Slot 0 is this rank's own block; in place it is in out, and the staged input lacks it.)
  for (int i = 0; i < n; ++i) {
    const std::size_t to = rank_at(i);
    copy_bytes(rotated + i * block,
               i == 0 && args.own_block_in_place ? out + args.recv_displs[to] * es
                                                 : in + args.send_displs[to] * es,
               block);
  }
  // 2. Round k: ship the slots with bit k set to r + d, take r - d's in their place.
  for (int round = 0; round < patterns::bruck_rounds(n); ++round) {
    const int d = 1 << round;
    std::size_t packed = 0;
    for (int i = d; i < n; ++i)
      if (i & d) copy_bytes(outgoing + block * packed++, rotated + i * block, block);
    exchange(ctx, patterns::wrap(ctx.rank + d, n), outgoing, packed * block,
             patterns::wrap(ctx.rank - d, n), incoming, packed * block,
             static_cast<std::uint32_t>(round));
    packed = 0;
    for (int i = d; i < n; ++i)
      if (i & d) copy_bytes(rotated + i * block, incoming + block * packed++, block);
  }
  // 3. The block from rank j sits in slot r - j.
  for (int j = 0; j < n; ++j)
    copy_bytes(out + args.recv_displs[j] * es,
               rotated + static_cast<std::size_t>(patterns::wrap(ctx.rank - j, n)) * block, block);
}

}  // namespace

extern const AlgorithmDescriptor alltoall_bruck =
    describe<run, accepts>(Algorithm::Bruck, "Bruck alltoall, for small uniform blocks");

}  // namespace cohort::algorithms
