// The gradient bucket layout of GradientSynchronizer, as torch's DDP reducer computes it
// (compute_bucket_assignment_by_size), simplified to one open bucket at a time.
//
// How it works: walk the gradients from the last registered to the first (the order backward
// produces them: the layers near the loss finish first). Append each one to the open bucket;
// close the bucket once it holds at least its cap (first_bucket_cap_bytes for the first bucket,
// so the first allreduce starts early in backward; bucket_cap_bytes after). A gradient whose
// dtype or device differs from the open bucket's closes it first: a bucket is one staging buffer
// reduced by one collective, so it holds one element type in one memory space.
//
// The layout depends only on the gradients' sizes, dtypes and devices, so every rank that
// registers the same model computes the same buckets in the same order.

#include <cohort/train/gradients.hpp>

namespace cohort::train {

std::vector<std::vector<std::size_t>> bucket_layout(std::span<const Buffer> grads,
                                                    std::size_t bucket_cap_bytes,
                                                    std::size_t first_bucket_cap_bytes) {
  std::vector<std::vector<std::size_t>> layout;
  std::vector<std::size_t> open;
  std::size_t open_bytes = 0;
  const auto close = [&] {
    layout.push_back(std::move(open));
    open.clear();
    open_bytes = 0;
  };
  for (std::size_t i = grads.size(); i-- > 0;) {
    const Buffer& grad = grads[i];
    if (!open.empty()) {
      const Buffer& head = grads[open.front()];
      if (grad.dtype() != head.dtype() || grad.device() != head.device()) close();
    }
    open.push_back(i);
    open_bytes += grad.nbytes();
    const std::size_t cap = layout.empty() ? first_bucket_cap_bytes : bucket_cap_bytes;
    if (open_bytes >= cap) close();
  }
  if (!open.empty()) close();
  return layout;
}

}  // namespace cohort::train
