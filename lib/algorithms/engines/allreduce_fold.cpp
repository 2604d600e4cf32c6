#include "algorithms/engines/allreduce_fold.hpp"

#include "algorithms/engines/point_to_point.hpp"
#include "reduce/reduce.hpp"

namespace cohort::algorithms {

const std::byte* allreduce_fold_in(const OpContext& ctx, const AllreduceArgs& args,
                                   const patterns::FoldPosition& fold, std::byte* incoming) {
  const std::size_t bytes = args.count * dtype_size(args.dtype);
  const auto* in = static_cast<const std::byte*>(args.in);
  auto* out = static_cast<std::byte*>(args.out);
  if (fold.role == patterns::FoldRole::Extra) {
    // In place, the result lands where the input is read from: finish sending first.
    RequestBatch batch(ctx);
    batch.send(fold.partner, in, bytes, kFoldStep);
    batch.wait();
    batch.recv(fold.partner, out, bytes, kUnfoldStep);
    batch.wait();
    return nullptr;
  }
  if (fold.role == patterns::FoldRole::Partner) {
    RequestBatch batch(ctx);
    batch.recv(fold.partner, incoming, bytes, kFoldStep);
    batch.wait();
    // The first reduction writes out = in op received, so `in` is never copied.
    reduce::reduce_to(args.op, args.dtype, out, in, incoming, args.count);
    return out;
  }
  return in;
}

void allreduce_unfold(const OpContext& ctx, const AllreduceArgs& args,
                      const patterns::FoldPosition& fold) {
  if (fold.role != patterns::FoldRole::Partner) return;
  RequestBatch batch(ctx);
  batch.send(fold.partner, args.out, args.count * dtype_size(args.dtype), kUnfoldStep);
  batch.wait();
}

}  // namespace cohort::algorithms
