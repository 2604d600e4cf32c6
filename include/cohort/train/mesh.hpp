#pragma once

/// The process mesh: the world's ranks arranged as a grid of parallelism dimensions (data,
/// pipeline, context, tensor, ...), with one communicator per dimension, so each kind of
/// parallelism talks only to its own group.
///
/// The step this header serves: once at start-up
///
///     ProcessMesh mesh = ProcessMesh::create(world, {.pp = 2, .tp = 2});   // dp inferred
///     GradientSynchronizer grads(mesh.comm_ptr(MeshDim::Data), grad_buffers);   // dp only
///     // tensor-parallel layers reduce over mesh.comm(MeshDim::Tensor), pipeline stages send to
///     // mesh.group_ranks(MeshDim::Pipeline)[stage + 1] ...
///
/// and in sequence/expert-parallel layers, all_to_all(mesh.comm(MeshDim::Context), in, out).
///
/// Layout (ml-starter's grid, Accelerate's ParallelismConfig and torch's DeviceMesh agree on it):
/// dimensions are listed slowest to fastest and a rank is the row-major linear index of its
/// coordinates, so the last dimension varies fastest. With dims (dp 2, pp 2, tp 2):
/// rank = (dp * 2 + pp) * 2 + tp; rank 5 is (dp 1, pp 0, tp 1); its tp group is [4, 5], its pp
/// group [5, 7], its dp group [1, 5]. The default order dp, pp, cp, tp puts tensor parallelism,
/// the most communication-hungry, on adjacent ranks (which share a node). Early ml-starter
/// computed dp_rank = rank % dp, contradicting its own grid; cohort derives every coordinate from
/// the one formula above.

#include <cohort/buffer.hpp>
#include <cohort/communicator.hpp>

#include <cstdint>
#include <memory>
#include <string_view>
#include <utility>
#include <vector>

namespace cohort::train {

/// What a mesh dimension parallelises. The names (mesh_dim_name) are Accelerate's and
/// Megatron's. An enum rather than free-form strings, so a misspelt dimension does not compile.
enum class MeshDim : std::uint8_t {
  Data,           ///< "dp": replicas of the model, gradients averaged across them
  DataReplicate,  ///< "dp_replicate": HSDP's replica dimension (with DataShard)
  DataShard,      ///< "dp_shard": FSDP / ZeRO sharding of parameters and optimizer state
  Pipeline,       ///< "pp": consecutive model stages
  Context,        ///< "cp": the sequence split across ranks (ring attention)
  Sequence,       ///< "sp": Ulysses sequence parallelism (all_to_all between heads and tokens)
  Expert,         ///< "ep": mixture-of-experts experts spread across ranks
  Tensor,         ///< "tp": single layers split across ranks
};

/// "dp", "dp_replicate", "dp_shard", "pp", "cp", "sp", "ep", "tp"; "?" for a value outside the
/// enum.
std::string_view mesh_dim_name(MeshDim dim) noexcept;

/// A size meaning "whatever the world leaves": world size / the product of the other sizes
/// (ml-starter's dp = world / (mp * pp)). At most one dimension may use it. 0 is not accepted as
/// a synonym: a forgotten size stays an error instead of silently absorbing the world.
inline constexpr int kInferSize = -1;

/// One dimension of a mesh: what it parallelises and how many ranks it spans (or kInferSize).
struct MeshAxis {
  MeshDim dim = MeshDim::Data;
  int size = 1;
};

/// The default layout, dp, pp, cp, tp from slowest to fastest (tensor parallelism fastest, as in
/// Megatron and Accelerate). By default data parallelism takes whatever the others leave.
struct MeshShape {
  int dp = kInferSize;
  int pp = 1;
  int cp = 1;
  int tp = 1;

  /// {{Data, dp}, {Pipeline, pp}, {Context, cp}, {Tensor, tp}}.
  std::vector<MeshAxis> axes() const;
};

/// The world's ranks as a grid of dimensions, with a communicator for each dimension and for
/// each flattened group asked for at creation. Queries (size, coord, group_ranks, rank_of, ...)
/// are pure arithmetic, answer for any set of the mesh's dimensions, and never communicate;
/// comm() returns a communicator built by create(). Copies share the communicators. Immutable
/// after create(), so const calls are safe from any thread.
///
/// Flattened groups (Accelerate's "dp_shard_cp", "dp_cp"; torch DeviceMesh's _flatten): several
/// dimensions taken together as one, e.g. {Data, Context} for averaging gradients over every
/// rank holding the same model shard. A set of dimensions is always read in the mesh's order
/// (slowest first) whatever order it is written in, and its coordinate is the row-major index of
/// the rank's coordinates in those dimensions.
class ProcessMesh {
 public:
  /// Collective over `world`: arranges its ranks as `axes` (slowest first) and builds the
  /// communicators: one split of `world` per dimension (color = the row-major index of the other
  /// coordinates, key = this coordinate, so rank i of comm(d) is the rank with coordinate i
  /// along d) and one per set in `flatten` with more than one dimension. Groups of a single rank
  /// (a dimension of size 1) share one communicator of this rank alone; in a world of one every
  /// communicator is `world` itself and nothing is communicated.
  ///
  /// Every rank must pass the same axes and flattened sets. They are checked with one allgather
  /// before anything else happens, so the errors below are thrown on every rank alike, even when
  /// only some ranks passed bad values:
  /// - ranks passing different axes or flattened sets: InvalidArgument naming each rank's mesh;
  /// - no axes, a dimension listed twice, a size below 1 other than kInferSize, more than one
  ///   kInferSize, sizes whose product differs from the world size (or does not divide it, with
  ///   kInferSize): InvalidArgument naming the sizes and the world size;
  /// - a flattened set that is empty, repeats a dimension or names one the mesh lacks:
  ///   InvalidArgument naming the set.
  /// A null `world` throws InvalidArgument locally.
  ///
  /// Cost: an allgather of 176 bytes per rank, then one Communicator::split per dimension and
  /// flattened group with more than one rank, plus one if any group has a single rank (each split
  /// is itself an allgather of 304 bytes per rank over `world`; the new communicators share the
  /// world's connections and set up a shared arena only on their first collective that uses one).
  /// Measured with cohort-mesh-bench (README): a 2 x 2 x 2 mesh on 8 ranks, ~15-30 barriers.
  static ProcessMesh create_with_axes(std::shared_ptr<Communicator> world,
                                      std::vector<MeshAxis> axes,
                                      const std::vector<std::vector<MeshDim>>& flatten = {});
  /// create_with_axes(world, shape.axes(), flatten): the default layout dp, pp, cp, tp. (Not an
  /// overload of the above: GCC would find `create(world, {.tp = 2})` ambiguous with the
  /// vector's size constructor.)
  static ProcessMesh create(std::shared_ptr<Communicator> world, const MeshShape& shape = {},
                            const std::vector<std::vector<MeshDim>>& flatten = {});

  /// The communicator the mesh was made from.
  Communicator& world() const noexcept { return *world_; }
  /// This rank in the world, and the world's size.
  int rank() const noexcept { return rank_; }
  int world_size() const noexcept { return world_size_; }
  /// The dimensions, slowest first, with inferred sizes resolved.
  const std::vector<MeshAxis>& axes() const noexcept { return axes_; }
  /// Whether `dim` is one of the mesh's dimensions.
  bool has(MeshDim dim) const noexcept;

  /// Ranks along `dim` (the product of the sizes, for a set). InvalidArgument when the mesh
  /// lacks a dimension or a set is empty or repeats one, here and in every query below.
  int size(MeshDim dim) const;
  int size(const std::vector<MeshDim>& dims) const;
  /// This rank's coordinate along `dim` (for a set, the row-major index of its coordinates in
  /// those dimensions, in mesh order); equals its rank in comm(dim).
  int coord(MeshDim dim) const;
  int coord(const std::vector<MeshDim>& dims) const;
  /// This rank's group along `dim`: the world ranks that differ from it only in `dim` (in the
  /// set), ordered by their coordinate there, i.e. by rank in comm(dim).
  std::vector<int> group_ranks(MeshDim dim) const;
  std::vector<int> group_ranks(const std::vector<MeshDim>& dims) const;
  /// Every group along `dim` (the set), each as group_ranks() would list it, ordered by the
  /// row-major index of the other coordinates (the split's color). Together they partition the
  /// world.
  std::vector<std::vector<int>> all_groups(MeshDim dim) const;
  std::vector<std::vector<int>> all_groups(const std::vector<MeshDim>& dims) const;

  /// The communicator of this rank's group along `dim` (the set). InvalidArgument when the mesh
  /// lacks a dimension; InvalidUsage for a set of several dimensions that was not passed to
  /// create()'s `flatten`.
  Communicator& comm(MeshDim dim) const;
  Communicator& comm(const std::vector<MeshDim>& dims) const;
  /// The same communicator as a shared pointer, for code that keeps it (GradientSynchronizer).
  std::shared_ptr<Communicator> comm_ptr(MeshDim dim) const;
  std::shared_ptr<Communicator> comm_ptr(const std::vector<MeshDim>& dims) const;

  /// Coordinates of this rank / of world rank `rank`, one per dimension in mesh order.
  /// InvalidArgument for a rank outside the world.
  std::vector<int> coords() const { return coords_of(rank_); }
  std::vector<int> coords_of(int rank) const;
  /// The world rank at `coords` (one per dimension, in mesh order). InvalidArgument for the
  /// wrong number of coordinates or one outside its dimension, naming it.
  int rank_of(const std::vector<int>& coords) const;

 private:
  ProcessMesh() = default;
  /// A bitmask of dimension positions in axes_, validated (present, unique, non-empty).
  std::uint32_t positions_of(const std::vector<MeshDim>& dims, const char* op) const;
  std::uint32_t position_of(MeshDim dim, const char* op) const;
  const std::shared_ptr<Communicator>& communicator(std::uint32_t positions, const char* op) const;

  std::shared_ptr<Communicator> world_;
  int rank_ = 0;
  int world_size_ = 1;
  std::vector<MeshAxis> axes_;
  /// Per group (a bitmask of positions in axes_), its communicator.
  std::vector<std::pair<std::uint32_t, std::shared_ptr<Communicator>>> comms_;
};

/// ml-starter's all_to_all (torch's all_to_all_single with equal splits) along dim 0, the
/// exchange of sequence and expert parallelism: `in` is cut along dim 0 into comm.size() equal
/// blocks, block j goes to rank j, and rank j's block arrives as block comm.rank() of `out`. So
/// with 2 ranks, r0 [0,1,2,3] and r1 [4,5,6,7] become [0,1,4,5] and [2,3,6,7].
///
/// It is its own adjoint: the gradient of `in` is all_to_all of the gradient of `out` over the
/// same group, and applying it twice gives back the input.
///
/// Collective; every rank passes the same shape and dtype (as Communicator::alltoall). `in` and
/// `out` have equal shapes and dtypes, are contiguous, and may be the same buffer (host memory
/// only: the device path wants distinct buffers). Host memory (cpu, pinned, managed) or device
/// memory: device buffers go through the communicator's device path (NCCL grouped send/recv),
/// which refuses a host/device mix naming both. Throws before
/// anything moves: InvalidArgument for a 0-d buffer, dim 0 not divisible by comm.size() (naming
/// both), mismatched shapes or dtypes, a non-contiguous or read-only output; Unsupported for
/// device memory without CUDA or a visible device. A world of one copies `in` to `out`.
void all_to_all(Communicator& comm, const Buffer& in, const Buffer& out,
                const CollectiveOptions& options = {});
/// The same into a new buffer of in's shape and dtype: host memory for a host input, device memory
/// of the same device (cuda:N) for a device one.
Buffer all_to_all(Communicator& comm, const Buffer& in, const CollectiveOptions& options = {});
/// Over the mesh's group along `dim`: all_to_all(mesh.comm(dim), in, out).
void all_to_all(const ProcessMesh& mesh, MeshDim dim, const Buffer& in, const Buffer& out,
                const CollectiveOptions& options = {});

}  // namespace cohort::train
