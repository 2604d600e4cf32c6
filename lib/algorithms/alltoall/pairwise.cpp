// Pairwise-exchange alltoall (alltoallv).
//
// How it works: in step s = 1 .. n - 1 rank r sends its block for rank r + s and receives the
// block from rank r - s, so every step is a perfect matching of senders to receivers and no rank
// is flooded. Up to kPairwiseWindow steps are in flight at once to hide per-message latency.
// Our own block is copied locally (unless an in-place call left it where it belongs).
//
// Cost, n ranks: n - 1 steps; each rank sends and receives everything except its own block
// once: bandwidth-optimal, latency linear in n (Bruck is better for tiny uniform blocks).
// Handles any counts and displacements, every world size and count.

#include "algorithms/descriptor.hpp"
#include "algorithms/engines/point_to_point.hpp"
#include "core/check.hpp"
#include "core/copy_bytes.hpp"
#include "patterns/ring.hpp"

#include <array>
#include <cstring>
#include <vector>

namespace cohort::algorithms {
namespace {

/// Steps whose messages may be in flight together.
constexpr int kPairwiseWindow = 8;

void run(const OpContext& ctx, const AlltoallArgs& args) {
  const std::size_t es = dtype_size(args.dtype);
  const auto* in = static_cast<const std::byte*>(args.in);
  auto* out = static_cast<std::byte*>(args.out);
  const auto me = static_cast<std::size_t>(ctx.rank);
  COHORT_CHECK(args.send_counts[me] == args.recv_counts[me]);
  if (args.send_counts[me] > 0 && !args.own_block_in_place)
    copy_bytes(out + args.recv_displs[me] * es, in + args.send_displs[me] * es,
               args.send_counts[me] * es);

  std::vector<std::array<transport::Request, 2>> in_flight(kPairwiseWindow);
  for (int s = 1; s < ctx.size; ++s) {
    auto& slot = in_flight[s % kPairwiseWindow];
    // 1. Retire the step that used this window slot.
    wait_request(ctx, slot[0]);
    wait_request(ctx, slot[1]);
    // 2. Exchange with this step's pair: receive from r - s, send to r + s.
    const auto to = static_cast<std::size_t>(patterns::wrap(ctx.rank + s, ctx.size));
    const auto from = static_cast<std::size_t>(patterns::wrap(ctx.rank - s, ctx.size));
    const auto step = static_cast<std::uint32_t>(s);
    slot[0] = post_recv(ctx, static_cast<int>(from), out + args.recv_displs[from] * es,
                        args.recv_counts[from] * es, step);
    slot[1] = post_send(ctx, static_cast<int>(to), in + args.send_displs[to] * es,
                        args.send_counts[to] * es, step);
  }
  // 3. Drain the window.
  for (auto& slot : in_flight) {
    wait_request(ctx, slot[0]);
    wait_request(ctx, slot[1]);
  }
}

}  // namespace

extern const AlgorithmDescriptor alltoall_pairwise =
    describe<run>(Algorithm::Pairwise, "Pairwise-exchange alltoall (alltoallv)");

}  // namespace cohort::algorithms
