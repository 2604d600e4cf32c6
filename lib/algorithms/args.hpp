#pragma once

// The arguments of each collective: the one representation of an op from the public call to the
// algorithm. The communicator builds them on the caller's thread after validation
// (comm/validated_args.hpp), fingerprints them under COHORT_DEBUG=detail, and hands them to
// dispatch, which normalises in-place forms (normalise.hpp) before any algorithm sees them.
// Counts and displacements are in elements.
//
// What an algorithm may assume, per collective, once normalised:
//   allreduce       in may equal out (in place); Avg arrives as itself (see allreduce/*.cpp).
//   broadcast       the root's data is in in (in may equal out); the root copies it into out
//                   itself (broadcast/root_input.hpp), where that overlaps best.
//   reduce          in does not overlap out, except in == out on the root (in place); Avg
//                   arrives as Sum (dispatch divides on the root).
//   allgather       this rank's block is already in place in out; in is left as it was (only
//                   single copy reads it, so peers copy from a buffer nobody just wrote).
//   gather          the root copies its own block of in into out itself (nothing when it is
//                   there already), where that overlaps best.
//   scatter         the root copies its own block of in into out itself (nothing when it is
//                   there already), where that overlaps best.
//   reduce_scatter  out may be in's block `rank` (in place); Avg arrives as Sum.
//   alltoall        in and out do not overlap, except that with own_block_in_place this rank's
//                   own block is in out already and nowhere in in.

#include <cohort/algorithm.hpp>
#include <cohort/dtype.hpp>

#include "core/rank_sizes.hpp"

#include <cstddef>
#include <vector>

namespace cohort::algorithms {

/// out = op over ranks of in. count may be 0.
struct AllreduceArgs {
  const void* in;
  void* out;
  std::size_t count;
  DType dtype;
  ReduceOp op;
};

/// The root's in (null elsewhere) reaches every rank's out.
struct BroadcastArgs {
  const void* in;
  void* out;
  std::size_t count;
  DType dtype;
  int root;
};

/// out (root only; null elsewhere) = op over ranks of in.
struct ReduceArgs {
  const void* in;
  void* out;
  std::size_t count;
  DType dtype;
  ReduceOp op;
  int root;
};

/// Every rank's block r, counts[r] long, lands at displs[r] of out. Uniform allgather has all
/// counts equal and variable false.
struct AllgatherArgs {
  const void* in;
  void* out;
  RankSizes counts;
  RankSizes displs;
  std::size_t total;  ///< sum of counts
  DType dtype;
  bool variable;  ///< allgatherv
};

/// The root's out (null elsewhere) receives rank r's in at displs[r], counts[r] long.
struct GatherArgs {
  const void* in;
  void* out;
  RankSizes counts;
  RankSizes displs;
  std::size_t total;
  DType dtype;
  int root;
  bool variable;  ///< gatherv
};

/// The root's in (null elsewhere) holds rank r's block at displs[r], counts[r] long; every rank
/// receives its block into out.
struct ScatterArgs {
  const void* in;
  void* out;
  RankSizes counts;
  RankSizes displs;
  std::size_t total;
  DType dtype;
  int root;
  bool variable;  ///< scatterv
};

/// in holds size * count elements; out (count elements) = block `rank` of the reduction.
struct ReduceScatterArgs {
  const void* in;
  void* out;
  std::size_t count;
  DType dtype;
  ReduceOp op;
};

/// Block j of in (send_counts[j] at send_displs[j]) goes to rank j; the block from rank j lands
/// at recv_displs[j].
struct AlltoallArgs {
  const void* in;
  void* out;
  RankSizes send_counts;
  RankSizes send_displs;
  RankSizes recv_counts;
  RankSizes recv_displs;
  std::size_t send_total;
  std::size_t recv_total;
  DType dtype;
  bool uniform;  ///< all counts equal (alltoall rather than alltoallv)
  /// Set only by the in-place normalisation (normalise.hpp): this rank's own block already sits
  /// where it belongs in out, and `in`, a staged copy of the other blocks, lacks it. Read the own
  /// block from out, or leave it where it is.
  bool own_block_in_place = false;
};

struct BarrierArgs {};

/// The family each Args type belongs to (selection, descriptors).
template <class Args>
inline constexpr Collective kFamilyOf = Collective::Barrier;
template <>
inline constexpr Collective kFamilyOf<AllreduceArgs> = Collective::Allreduce;
template <>
inline constexpr Collective kFamilyOf<BroadcastArgs> = Collective::Broadcast;
template <>
inline constexpr Collective kFamilyOf<ReduceArgs> = Collective::Reduce;
template <>
inline constexpr Collective kFamilyOf<AllgatherArgs> = Collective::Allgather;
template <>
inline constexpr Collective kFamilyOf<GatherArgs> = Collective::Gather;
template <>
inline constexpr Collective kFamilyOf<ScatterArgs> = Collective::Scatter;
template <>
inline constexpr Collective kFamilyOf<ReduceScatterArgs> = Collective::ReduceScatter;
template <>
inline constexpr Collective kFamilyOf<AlltoallArgs> = Collective::Alltoall;

/// The collective the user called (the v-form when variable).
inline Collective collective_of(const AllreduceArgs&) {
  return Collective::Allreduce;
}
inline Collective collective_of(const BroadcastArgs&) {
  return Collective::Broadcast;
}
inline Collective collective_of(const ReduceArgs&) {
  return Collective::Reduce;
}
inline Collective collective_of(const AllgatherArgs& a) {
  return a.variable ? Collective::Allgatherv : Collective::Allgather;
}
inline Collective collective_of(const GatherArgs& a) {
  return a.variable ? Collective::Gatherv : Collective::Gather;
}
inline Collective collective_of(const ScatterArgs& a) {
  return a.variable ? Collective::Scatterv : Collective::Scatter;
}
inline Collective collective_of(const ReduceScatterArgs&) {
  return Collective::ReduceScatter;
}
inline Collective collective_of(const AlltoallArgs& a) {
  return a.uniform ? Collective::Alltoall : Collective::Alltoallv;
}
inline Collective collective_of(const BarrierArgs&) {
  return Collective::Barrier;
}

/// True when the op moves no element on any rank, which every rank can tell from its own
/// arguments (the counts every rank must pass alike): such an op may be skipped without a
/// message. Not for alltoallv, whose counts differ per rank (a rank with nothing to send or
/// receive cannot know that the others have nothing either), nor barrier.
inline bool moves_nothing(const AllreduceArgs& a) {
  return a.count == 0;
}
inline bool moves_nothing(const BroadcastArgs& a) {
  return a.count == 0;
}
inline bool moves_nothing(const ReduceArgs& a) {
  return a.count == 0;
}
inline bool moves_nothing(const AllgatherArgs& a) {
  return a.total == 0;
}
inline bool moves_nothing(const GatherArgs& a) {
  return a.total == 0;
}
inline bool moves_nothing(const ScatterArgs& a) {
  return a.total == 0;
}
inline bool moves_nothing(const ReduceScatterArgs& a) {
  return a.count == 0;
}
inline bool moves_nothing(const AlltoallArgs& a) {
  return a.uniform && a.send_total == 0;
}
inline bool moves_nothing(const BarrierArgs&) {
  return false;
}

}  // namespace cohort::algorithms
