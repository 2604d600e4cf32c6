// Single-copy allgather(v), for ranks of one host that may read each other's memory
// (engines/single_copy.hpp).
//
// How it works: every rank exposes its input block, then copies every other rank's block
// straight out of that rank's input into its own output, taking ranks in ring order from the
// next one so that ranks spread their reads over different sources; then all wait until every
// rank is done reading.
//
// Cost per rank, total m bytes: m - m/n bytes copied once, against the arena's m/n in and
// m - m/n out, and two handoffs. The rank's own block was put in place before (normalise.hpp),
// so peers read the input, which nothing writes meanwhile.

#include "algorithms/engines/single_copy.hpp"
#include "algorithms/descriptor.hpp"

namespace cohort::algorithms {
namespace {

void run(const OpContext& ctx, const AllgatherArgs& args) {
  const std::size_t es = dtype_size(args.dtype);
  const auto me = static_cast<std::size_t>(ctx.rank);
  auto* out = static_cast<std::byte*>(args.out);
  SingleCopyOp op(ctx, *ctx.arena());
  const ExposedBlock mine{args.in, args.counts[me] * es};
  op.expose({&mine, 1});
  for (int k = 1; k < ctx.size; ++k) {
    const auto r = static_cast<std::size_t>((ctx.rank + k) % ctx.size);
    op.read(static_cast<int>(r), 0, out + args.displs[r] * es, args.counts[r] * es);
  }
  op.release_after_all();
}

}  // namespace

extern const AlgorithmDescriptor allgather_single_copy =
    describe<run, reading_peers<AllgatherArgs>>(
        Algorithm::SingleCopy,
        "Single-copy allgather(v): each rank copies its peers' blocks out of their buffers");

}  // namespace cohort::algorithms
