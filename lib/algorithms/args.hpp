#pragma once

// Arguments of each collective as algorithms see them: raw pointers, element counts, dtype.
// The communicator has already validated everything (sizes, roots, devices, aliasing rules)
// and normalised in-place forms, as described per struct. Counts are in elements.

#include <cohort/dtype.hpp>

#include <cstddef>
#include <span>

namespace cohort::algorithms {

/// out = op over ranks of in. `in` may equal `out` (in-place). count may be 0.
/// Avg arrives as Sum: the communicator divides afterwards.
struct AllreduceArgs {
  const void* in;
  void* out;
  std::size_t count;
  DType dtype;
  ReduceOp op;
};

/// In place: on root `buf` holds the data, on every other rank it receives it.
struct BroadcastArgs {
  void* buf;
  std::size_t count;
  DType dtype;
  int root;
};

/// out (root only; null elsewhere) = op over ranks of in. Avg arrives as Sum.
struct ReduceArgs {
  const void* in;
  void* out;
  std::size_t count;
  DType dtype;
  ReduceOp op;
  int root;
};

/// In place: buf holds every rank's block at displs[r] (elements), counts[r] long; the caller
/// already copied this rank's own block into place. Uniform allgather has all counts equal.
struct AllgatherArgs {
  void* buf;
  std::span<const std::size_t> counts;
  std::span<const std::size_t> displs;
  DType dtype;
};

/// Root: out receives rank r's block at displs[r], counts[r] long; root's own block is already in
/// place. Non-roots: in holds counts[rank] elements, out is null.
struct GatherArgs {
  const void* in;
  void* out;
  std::span<const std::size_t> counts;
  std::span<const std::size_t> displs;
  DType dtype;
  int root;
};

/// Root: in holds rank r's block at displs[r], counts[r] long (root copies its own). Every rank
/// except root receives counts[rank] elements into out.
struct ScatterArgs {
  const void* in;
  void* out;
  std::span<const std::size_t> counts;
  std::span<const std::size_t> displs;
  DType dtype;
  int root;
};

/// in holds size * count elements; out (count elements) = block `rank` of the reduction.
/// out may alias in's block `rank` (in-place). Avg arrives as Sum.
struct ReduceScatterArgs {
  const void* in;
  void* out;
  std::size_t count;
  DType dtype;
  ReduceOp op;
};

/// Block j of in (send_counts[j] at send_displs[j]) goes to rank j; block from rank j lands at
/// recv_displs[j]. in and out do not overlap (the communicator stages in-place calls).
struct AlltoallArgs {
  const void* in;
  void* out;
  std::span<const std::size_t> send_counts;
  std::span<const std::size_t> send_displs;
  std::span<const std::size_t> recv_counts;
  std::span<const std::size_t> recv_displs;
  DType dtype;
  bool uniform;  ///< all counts equal (alltoall rather than alltoallv)
};

}  // namespace cohort::algorithms
