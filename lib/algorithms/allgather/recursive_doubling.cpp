// Recursive-doubling allgather, for power-of-two world sizes.
//
// How it works: in round k (distance d = 2^k) rank r swaps everything it has gathered so far —
// the blocks of the aligned group of d ranks containing r — with partner r xor d, doubling its
// group. When a group's blocks sit back to back in `buf` (the usual layout) they travel as one
// message; otherwise as one message per block, in rank order on both sides.
//
// Cost, n ranks, total m bytes: log2(n) rounds, each rank sending and receiving m - m_r bytes in
// total: latency-optimal and bandwidth-optimal for uniform blocks.
// Declines when the world size is not a power of two (Bruck or the ring take those).

#include "algorithms/descriptor.hpp"
#include "algorithms/engines/point_to_point.hpp"
#include "patterns/binomial_tree.hpp"
#include "patterns/power_of_two_fold.hpp"

namespace cohort::algorithms {
namespace {

/// Posts the transfer of blocks [first, first + n) in one direction.
void post_group(RequestBatch& batch, bool sending, int peer, std::byte* buf,
                const AllgatherArgs& args, std::size_t es, int first, int n, std::uint32_t step) {
  const auto lo = static_cast<std::size_t>(first);
  const auto hi = static_cast<std::size_t>(first + n);
  bool contiguous = true;
  for (std::size_t i = lo; i + 1 < hi; ++i)
    contiguous = contiguous && args.displs[i] + args.counts[i] == args.displs[i + 1];
  auto post = [&](std::size_t offset, std::size_t count) {
    if (sending)
      batch.send(peer, buf + offset * es, count * es, step);
    else
      batch.recv(peer, buf + offset * es, count * es, step);
  };
  if (contiguous) {
    post(args.displs[lo], args.displs[hi - 1] + args.counts[hi - 1] - args.displs[lo]);
  } else {
    // Same-tag messages between one pair match in posting order: both sides go in rank order.
    for (std::size_t i = lo; i < hi; ++i) post(args.displs[i], args.counts[i]);
  }
}

bool accepts(const OpContext& ctx, const AllgatherArgs&) {
  return patterns::is_power_of_two(ctx.size);
}

void run(const OpContext& ctx, const AllgatherArgs& args) {
  auto* buf = static_cast<std::byte*>(args.out);
  const std::size_t es = dtype_size(args.dtype);
  std::uint32_t step = 0;
  // Round k: swap our group of 2^k blocks for the partner's.
  for (int mask = 1; mask < ctx.size; mask *= 2, ++step) {
    const int partner = patterns::doubling_partner(ctx.rank, step);
    const int mine = ctx.rank & ~(mask - 1);
    const int theirs = mine ^ mask;
    RequestBatch batch(ctx);
    post_group(batch, false, partner, buf, args, es, theirs, mask, step);
    post_group(batch, true, partner, buf, args, es, mine, mask, step);
    batch.wait();
  }
}

}  // namespace

extern const AlgorithmDescriptor allgather_recursive_doubling = describe<run, accepts>(
    Algorithm::RecursiveDoubling, "Recursive-doubling allgather, for power-of-two world sizes");

}  // namespace cohort::algorithms
