// Dissemination barrier (Hensgen, Finkel & Manber).
//
// How it works: in round k rank r sends a one-byte token to r + 2^k and waits for one from
// r - 2^k (patterns/dissemination.hpp). After round k each rank has transitively heard from the
// 2^(k+1) - 1 ranks before it, so after ceil(log2 n) rounds no rank can leave before every rank
// has entered.
//
// Cost: ceil(log2 n) rounds of one tiny message per rank, on any world size (a tree barrier
// needs 2 log2 n rounds). Accepts every world size.

#include "patterns/dissemination.hpp"
#include "algorithms/descriptor.hpp"
#include "algorithms/engines/point_to_point.hpp"

namespace cohort::algorithms {

namespace {

void run(const OpContext& ctx, const BarrierArgs&) {
  const std::byte token_out{1};
  std::byte token_in{0};
  for (int round = 0; round < patterns::dissemination_rounds(ctx.size); ++round) {
    const auto r = patterns::dissemination_round(ctx.rank, ctx.size, round);
    exchange(ctx, r.send_to, &token_out, 1, r.recv_from, &token_in, 1,
             static_cast<std::uint32_t>(round));
  }
}

}  // namespace

extern const AlgorithmDescriptor barrier_dissemination =
    describe<run>(Algorithm::Dissemination, "Dissemination barrier (Hensgen, Finkel & Manber)");

}  // namespace cohort::algorithms
