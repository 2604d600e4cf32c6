#pragma once

// Argument checks shared by every collective. Each throws Error(InvalidArgument) whose message
// starts with the op's name and names the offending value, before any byte moves. They check
// only what one rank can see; what must agree across ranks is the fingerprint's job.

#include <cohort/buffer.hpp>
#include <cohort/dtype.hpp>

#include <chrono>
#include <cstddef>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

namespace cohort::comm {

/// A buffer the op reads: host-accessible, contiguous, byte size representable.
void check_input(std::string_view op, std::string_view role, const Buffer& buffer);
/// A buffer the op writes: as check_input, and not read-only.
void check_output(std::string_view op, std::string_view role, const Buffer& buffer);
void check_same_dtype(std::string_view op, const Buffer& in, const Buffer& out);
/// `role` has `expected` elements; `why` explains the expectation ("= input count").
void check_count(std::string_view op, std::string_view role, const Buffer& buffer,
                 std::size_t expected, std::string_view why);
void check_root(std::string_view op, int root, int size);
void check_reduce_op(std::string_view op, ReduceOp reduce_op, DType dtype);
/// Point-to-point peer: in [0, size) and not this rank.
void check_peer(std::string_view op, int peer, int rank, int size);
void check_tag(std::string_view op, int tag);
void check_timeout(std::string_view op, std::optional<std::chrono::milliseconds> timeout);

/// a * b, or InvalidArgument naming `what` when it overflows size_t.
std::size_t checked_multiply(std::string_view op, std::string_view what, std::size_t a,
                             std::size_t b);

/// Per-rank element counts with their exclusive prefix sums (displacements) and total.
struct Layout {
  std::vector<std::size_t> counts;
  std::vector<std::size_t> displs;
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
