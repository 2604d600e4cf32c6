// contiguous_gradients: gradients laid out the way GradientSynchronizer can reduce without
// copies. Buckets hold consecutive registration indices, so consecutive views of one allocation
// make every bucket one contiguous range of memory (see gradient_synchronizer.cpp's "view"
// buckets).

#include <cohort/error.hpp>
#include <cohort/train/gradients.hpp>

#include <fmt/format.h>

#include <cstdint>
#include <limits>

#include "train/mappable_host_memory.hpp"

namespace cohort::train {

std::vector<Buffer> contiguous_gradients(std::span<const std::size_t> counts, DType dtype) {
  if (!dtype_is_floating(dtype)) {
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("contiguous_gradients: dtype {} is not floating", dtype_name(dtype)));
  }
  std::size_t total = 0;
  for (std::size_t n : counts) {
    if (n > std::numeric_limits<std::size_t>::max() - total)
      throw Error(ErrorCode::InvalidArgument, "contiguous_gradients: total count overflows");
    total += n;
  }
  // The allocation checks the byte size; the views share (and keep alive) its storage. Mappable,
  // so the ranks of a host reduce each other's buckets in place.
  const Buffer storage = allocate_mappable_or_ordinary(total, dtype, "contiguous gradients");
  std::vector<Buffer> grads;
  grads.reserve(counts.size());
  std::int64_t offset = 0;
  for (std::size_t n : counts) {
    grads.push_back(
        Buffer::view(storage.data(), {static_cast<std::int64_t>(n)}, dtype, storage.device(), {},
                     offset * static_cast<std::int64_t>(dtype_size(dtype)), storage.owner()));
    offset += static_cast<std::int64_t>(n);
  }
  return grads;
}

}  // namespace cohort::train
