#pragma once

// Argument checks shared by every collective. Each throws Error(InvalidArgument) whose message
// starts with the op's name and names the offending value, before any byte moves. They check
// only what one rank can see; what must agree across ranks is the fingerprint's job.

#include <cohort/buffer.hpp>
#include <cohort/dtype.hpp>
#include <cohort/work.hpp>

#include "core/rank_sizes.hpp"

#include <chrono>
#include <cstddef>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

namespace cohort::comm {

// The checks every op makes are inline, their refusals out of line: a tiny collective's
// bookkeeping is a few hundred instructions, and six calls per op showed in it.
[[noreturn]] void refuse_buffer(std::string_view op, std::string_view role, const Buffer& buffer);
[[noreturn]] void refuse_read_only(std::string_view op, std::string_view role);
[[noreturn]] void refuse_dtypes(std::string_view op, const Buffer& in, const Buffer& out);
[[noreturn]] void refuse_count(std::string_view op, std::string_view role, const Buffer& buffer,
                               std::size_t expected, std::string_view why);
[[noreturn]] void refuse_root(std::string_view op, int root, int size);
[[noreturn]] void refuse_timeout(std::string_view op, std::chrono::milliseconds timeout);

/// Contiguous, and its byte size representable.
inline bool buffer_usable(const Buffer& buffer) noexcept {
  std::size_t bytes = 0;  // checked by multiplying: a division per buffer showed in tiny ops
  return buffer.is_contiguous() &&
         !__builtin_mul_overflow(buffer.count(), buffer.element_size(), &bytes);
}

/// A buffer the op reads: contiguous, byte size representable (on any device: device buffers
/// take this path to NCCL, so where the memory lives is the placement's to decide).
inline void check_input(std::string_view op, std::string_view role, const Buffer& buffer) {
  if (!buffer_usable(buffer)) [[unlikely]]
    refuse_buffer(op, role, buffer);
}
/// A buffer the op writes: as check_input, and not read-only.
inline void check_output(std::string_view op, std::string_view role, const Buffer& buffer) {
  check_input(op, role, buffer);
  if (buffer.read_only()) [[unlikely]]
    refuse_read_only(op, role);
}
inline void check_same_dtype(std::string_view op, const Buffer& in, const Buffer& out) {
  if (in.dtype() != out.dtype()) [[unlikely]]
    refuse_dtypes(op, in, out);
}
/// `role` has `expected` elements; `why` explains the expectation ("= input count").
inline void check_count(std::string_view op, std::string_view role, const Buffer& buffer,
                        std::size_t expected, std::string_view why) {
  if (buffer.count() != expected) [[unlikely]]
    refuse_count(op, role, buffer, expected, why);
}
inline void check_root(std::string_view op, int root, int size) {
  if (root < 0 || root >= size) [[unlikely]]
    refuse_root(op, root, size);
}
void check_reduce_op(std::string_view op, ReduceOp reduce_op, DType dtype);
[[noreturn]] void refuse_peer(std::string_view op, int peer, int rank, int size);
[[noreturn]] void refuse_tag(std::string_view op, int tag);
/// Point-to-point peer: in [0, size) and not this rank.
inline void check_peer(std::string_view op, int peer, int rank, int size) {
  if (peer < 0 || peer >= size || peer == rank) [[unlikely]]
    refuse_peer(op, peer, rank, size);
}
inline void check_tag(std::string_view op, int tag) {
  if (tag < 0) [[unlikely]]
    refuse_tag(op, tag);
}
inline void check_timeout(std::string_view op, std::optional<std::chrono::milliseconds> timeout) {
  if (timeout && (timeout->count() <= 0 || *timeout > kMaxTimeout)) [[unlikely]]
    refuse_timeout(op, *timeout);
}

/// a * b, or InvalidArgument naming `what` when it overflows size_t.
std::size_t checked_multiply(std::string_view op, std::string_view what, std::size_t a,
                             std::size_t b);

/// Per-rank element counts with their exclusive prefix sums (displacements) and total.
struct Layout {
  RankSizes counts;
  RankSizes displs;
  std::size_t total = 0;
};
/// Every rank contributes `count` elements.
Layout uniform_layout(std::string_view op, std::size_t count, int size, DType dtype);
/// A user-given counts span: one entry per rank, total and its byte size representable.
Layout counts_layout(std::string_view op, std::string_view name,
                     std::span<const std::size_t> counts, int size, DType dtype);

/// Whether the byte ranges of two buffers intersect (empty ranges never do).
bool overlaps(const void* a, std::size_t a_bytes, const void* b, std::size_t b_bytes) noexcept;

}  // namespace cohort::comm
