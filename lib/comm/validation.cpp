#include "comm/validation.hpp"

#include <cohort/error.hpp>

#include <fmt/format.h>

#include <cstdint>
#include <limits>

namespace cohort::comm {
namespace {

[[noreturn]] void fail(std::string message) {
  throw Error(ErrorCode::InvalidArgument, message);
}

}  // namespace

// Host and device buffers alike: where an op runs is the placement's business
// (comm/placement.hpp), decided from the same buffers.
void refuse_buffer(std::string_view op, std::string_view role, const Buffer& buffer) {
  if (!buffer.is_contiguous()) {
    fail(
        fmt::format("{}: {} is not contiguous (shape has {} dims with explicit strides); pass a "
                    "contiguous buffer",
                    op, role, buffer.ndim()));
  }
  fail(fmt::format("{}: {} count {} x {} bytes ({}) overflows the address space", op, role,
                   buffer.count(), buffer.element_size(), dtype_name(buffer.dtype())));
}

void refuse_read_only(std::string_view op, std::string_view role) {
  fail(fmt::format("{}: {} is read-only", op, role));
}

void refuse_dtypes(std::string_view op, const Buffer& in, const Buffer& out) {
  fail(fmt::format("{}: input dtype {} differs from output dtype {}", op, dtype_name(in.dtype()),
                   dtype_name(out.dtype())));
}

void refuse_count(std::string_view op, std::string_view role, const Buffer& buffer,
                  std::size_t expected, std::string_view why) {
  fail(fmt::format("{}: {} has {} elements, expected {} ({})", op, role, buffer.count(), expected,
                   why));
}

void refuse_root(std::string_view op, int root, int size) {
  fail(fmt::format("{}: root {} is out of range for a communicator of size {}", op, root, size));
}

void refuse_timeout(std::string_view op, std::chrono::milliseconds timeout) {
  if (timeout.count() <= 0)
    fail(fmt::format("{}: timeout {} ms must be positive", op, timeout.count()));
  fail(fmt::format("{}: timeout {} ms is more than one year ({} ms), the longest accepted", op,
                   timeout.count(), kMaxTimeout.count()));
}

void check_reduce_op(std::string_view op, ReduceOp reduce_op, DType dtype) {
  if (!reduce_op_supports(reduce_op, dtype)) {
    fail(fmt::format("{}: reduce op {} is not defined for dtype {}", op, reduce_op_name(reduce_op),
                     dtype_name(dtype)));
  }
}

void refuse_peer(std::string_view op, int peer, int /*rank*/, int size) {
  if (peer < 0 || peer >= size) {
    fail(fmt::format("{}: peer {} is out of range for a communicator of size {}", op, peer, size));
  }
  fail(fmt::format("{}: peer {} is this rank; point-to-point needs another rank", op, peer));
}

void refuse_tag(std::string_view op, int tag) {
  fail(fmt::format("{}: tag {} is negative (tags must be >= 0)", op, tag));
}

std::size_t checked_multiply(std::string_view op, std::string_view what, std::size_t a,
                             std::size_t b) {
  std::size_t product = 0;
  if (__builtin_mul_overflow(a, b, &product)) {
    fail(fmt::format("{}: {} ({} x {}) overflows", op, what, a, b));
  }
  return product;
}

Layout uniform_layout(std::string_view op, std::size_t count, int size, DType dtype) {
  const auto ranks = static_cast<std::size_t>(size);
  Layout layout;
  layout.total = checked_multiply(op, "count x communicator size", count, ranks);
  checked_multiply(op, "total bytes", layout.total, dtype_size(dtype));
  // Filled in place: a temporary moved in was a store-forwarding stall per op in a profile.
  layout.counts.assign(ranks, count);
  layout.displs.assign(ranks, 0);
  for (std::size_t r = 0; r < ranks; ++r) layout.displs[r] = r * count;
  return layout;
}

Layout counts_layout(std::string_view op, std::string_view name,
                     std::span<const std::size_t> counts, int size, DType dtype) {
  const auto ranks = static_cast<std::size_t>(size);
  if (counts.size() != ranks) {
    fail(fmt::format("{}: {} has {} entries, expected {} (one per rank)", op, name, counts.size(),
                     ranks));
  }
  Layout layout;
  layout.counts = counts;
  layout.displs.resize(ranks);
  for (std::size_t r = 0; r < ranks; ++r) {
    layout.displs[r] = layout.total;
    if (counts[r] > std::numeric_limits<std::size_t>::max() - layout.total) {
      fail(fmt::format("{}: the sum of {} overflows at entry {} ({})", op, name, r, counts[r]));
    }
    layout.total += counts[r];
  }
  std::size_t bytes = 0;
  // The name is formatted only for the error: formatting it at every call showed in tiny
  // alltoallv's profiles.
  if (__builtin_mul_overflow(layout.total, dtype_size(dtype), &bytes)) [[unlikely]]
    checked_multiply(op, fmt::format("sum of {} in bytes", name), layout.total, dtype_size(dtype));
  return layout;
}

bool overlaps(const void* a, std::size_t a_bytes, const void* b, std::size_t b_bytes) noexcept {
  if (a_bytes == 0 || b_bytes == 0) return false;
  const auto x = reinterpret_cast<std::uintptr_t>(a);
  const auto y = reinterpret_cast<std::uintptr_t>(b);
  return x < y + b_bytes && y < x + a_bytes;
}

}  // namespace cohort::comm
