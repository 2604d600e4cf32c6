// ProcessMesh: the world's ranks as a grid of parallelism dimensions, one communicator per
// dimension and per flattened group.
//
// How create() works (every step collective over the world, every decision taken from data all
// ranks hold, so all ranks take the same branch):
//   1. Each rank encodes what it was asked for (the axes and the set of flattened groups) in a
//      fixed-size record, and the records are allgathered.
//   2. If any record differs from rank 0's, every rank throws the same InvalidArgument listing
//      the meshes the ranks asked for. Otherwise every rank holds the same inputs, so checking
//      them locally (sizes against the world, flattened sets against the axes) gives the same
//      verdict everywhere: an invalid mesh throws on every rank, before any communicator exists.
//   3. One split of the world per dimension, then one per flattened group, in the same order on
//      every rank: color = the row-major index of the rank's other coordinates, key = its
//      coordinate in the group. Groups of one rank share a single communicator of this rank
//      alone; a world of one uses the world for everything and communicates nothing.
//
// Cost: one allgather of kRecordWords int64 per rank, then the splits (see mesh.hpp).

#include <cohort/buffer.hpp>
#include <cohort/error.hpp>
#include <cohort/train/mesh.hpp>

#include "train/mesh_layout.hpp"

#include <algorithm>
#include <array>
#include <bitset>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cohort::train {
namespace {

using mesh_layout::kMaxAxes;
using mesh_layout::Positions;

// ---- The record of step 1. A flattened group is a set of MeshDims, i.e. an 8-bit mask, so the
// set of groups a rank asked for is exactly a 256-bit bitmap: a fixed size whatever was passed.

constexpr std::size_t kMaskCount = std::size_t{1} << kMaxAxes;  // subsets of MeshDim
constexpr std::size_t kBitmapWords = kMaskCount / 64;
constexpr std::size_t kAxesWord = 0;       // number of axes passed
constexpr std::size_t kFirstAxisWord = 1;  // (dim, size) of up to 8 axes
constexpr std::size_t kBitmapWord = kFirstAxisWord + 2 * kMaxAxes;
constexpr std::size_t kMalformedWord = kBitmapWord + kBitmapWords;  // malformed sets passed
constexpr std::size_t kRecordWords = kMalformedWord + 1;

using Record = std::array<std::int64_t, kRecordWords>;

// The set `dims` as a mask over MeshDim values; 0 when it is empty, repeats a dimension or holds
// a value outside the enum (a malformed set).
std::uint32_t dim_mask(const std::vector<MeshDim>& dims) {
  std::uint32_t mask = 0;
  for (MeshDim dim : dims) {
    const auto value = static_cast<unsigned>(dim);
    if (value >= kMaxAxes || (mask >> value & 1u) != 0) return 0;
    mask |= 1u << value;
  }
  return mask;
}

Record encode(const std::vector<MeshAxis>& axes, const std::vector<std::vector<MeshDim>>& flatten) {
  Record record{};
  record[kAxesWord] = static_cast<std::int64_t>(axes.size());
  // More than kMaxAxes axes always repeat a dimension (or hold a non-MeshDim value), so any such
  // mesh is rejected in step 2 whatever the axes beyond the eighth are.
  for (std::size_t i = 0; i < std::min(axes.size(), kMaxAxes); ++i) {
    record[kFirstAxisWord + 2 * i] = static_cast<std::int64_t>(axes[i].dim);
    record[kFirstAxisWord + 2 * i + 1] = axes[i].size;
  }
  for (const std::vector<MeshDim>& dims : flatten) {
    if (const std::uint32_t mask = dim_mask(dims); mask != 0) {
      record[kBitmapWord + mask / 64] |= std::int64_t{1} << (mask % 64);
    } else {
      ++record[kMalformedWord];
    }
  }
  return record;
}

std::string name(MeshDim dim) {
  return std::string(mesh_dim_name(dim));
}

// The C++ spelling, for messages that say what to write.
std::string enumerator(MeshDim dim) {
  switch (dim) {
    case MeshDim::Data: return "Data";
    case MeshDim::DataReplicate: return "DataReplicate";
    case MeshDim::DataShard: return "DataShard";
    case MeshDim::Pipeline: return "Pipeline";
    case MeshDim::Context: return "Context";
    case MeshDim::Sequence: return "Sequence";
    case MeshDim::Expert: return "Expert";
    case MeshDim::Tensor: return "Tensor";
  }
  return "?";
}

// Appends `item` to a list in `text`, after `separator` unless it is the first.
void append(std::string& text, std::string_view separator, std::string_view item) {
  if (!text.empty()) text += separator;
  text += item;
}

// "dp", or "#9" for a value outside MeshDim.
std::string value_text(unsigned value) {
  if (value < kMaxAxes) return name(static_cast<MeshDim>(value));
  std::string text = "#";  // built up, not "#" + string: GCC 12 misreports that as -Wrestrict
  text += std::to_string(value);
  return text;
}

// "dp, cp, dp" as written.
std::string list_text(const std::vector<MeshDim>& dims) {
  std::string text;
  for (MeshDim dim : dims) append(text, ", ", value_text(static_cast<unsigned>(dim)));
  return text;
}

// "dp+cp" for a mask over MeshDim values.
std::string dims_text(std::uint32_t mask) {
  std::string text;
  for (unsigned value = 0; value < kMaxAxes; ++value) {
    if ((mask >> value & 1u) != 0) {
      append(text, "+", name(static_cast<MeshDim>(value)));
    }
  }
  return text;
}

// What a rank asked for, for the mismatch message: "dp=2 x tp=4, flatten [dp+cp]".
std::string describe(const Record& record) {
  std::string text;
  const auto count = static_cast<std::size_t>(record[kAxesWord]);
  for (std::size_t i = 0; i < std::min(count, kMaxAxes); ++i) {
    const auto dim = static_cast<unsigned>(record[kFirstAxisWord + 2 * i]);
    const std::int64_t size = record[kFirstAxisWord + 2 * i + 1];
    append(text, " x ", value_text(dim) + "=" + (size == kInferSize ? "?" : std::to_string(size)));
  }
  if (count > kMaxAxes) text += " x ... (" + std::to_string(count) + " dimensions)";
  if (count == 0) text += "no dimensions";
  std::string groups;
  for (std::uint32_t mask = 1; mask < kMaskCount; ++mask) {
    if ((record[kBitmapWord + mask / 64] >> (mask % 64) & 1) != 0) {
      append(groups, ", ", dims_text(mask));
    }
  }
  if (record[kMalformedWord] > 0) {
    append(groups, ", ", std::to_string(record[kMalformedWord]) + " malformed");
  }
  if (!groups.empty()) text += ", flatten [" + groups + "]";
  return text;
}

// Step 2's first half: the same message on every rank when the ranks asked for different meshes.
void require_same_records(const std::vector<Record>& records) {
  if (std::all_of(records.begin(), records.end(),
                  [&](const Record& r) { return r == records.front(); })) {
    return;
  }
  // Ranks grouped by what they asked for, groups in order of their first rank.
  std::vector<std::pair<Record, std::vector<int>>> distinct;
  for (std::size_t r = 0; r < records.size(); ++r) {
    auto it = std::find_if(distinct.begin(), distinct.end(),
                           [&](const auto& entry) { return entry.first == records[r]; });
    if (it == distinct.end()) it = distinct.insert(distinct.end(), {records[r], {}});
    it->second.push_back(static_cast<int>(r));
  }
  std::string text;
  for (const auto& [record, ranks] : distinct) {
    std::string who;
    for (int rank : ranks) append(who, ", ", std::to_string(rank));
    append(text, "; ", (ranks.size() == 1 ? "rank " : "ranks ") + who + ": " + describe(record));
  }
  throw Error(ErrorCode::InvalidArgument,
              "ProcessMesh::create: the ranks passed different meshes (every rank must pass the "
              "same dimensions and flattened groups): " +
                  text);
}

std::vector<Record> allgather_records(Communicator& world, const Record& mine) {
  if (world.size() == 1) return {mine};
  std::vector<Record> records(static_cast<std::size_t>(world.size()));
  world.allgather(Buffer::view(mine.data(), mine.size(), DType::Int64),
                  Buffer::view(records.data(), records.size() * kRecordWords, DType::Int64));
  return records;
}

}  // namespace

std::string_view mesh_dim_name(MeshDim dim) noexcept {
  switch (dim) {
    case MeshDim::Data: return "dp";
    case MeshDim::DataReplicate: return "dp_replicate";
    case MeshDim::DataShard: return "dp_shard";
    case MeshDim::Pipeline: return "pp";
    case MeshDim::Context: return "cp";
    case MeshDim::Sequence: return "sp";
    case MeshDim::Expert: return "ep";
    case MeshDim::Tensor: return "tp";
  }
  return "?";
}

std::vector<MeshAxis> MeshShape::axes() const {
  return {
      {MeshDim::Data, dp}, {MeshDim::Pipeline, pp}, {MeshDim::Context, cp}, {MeshDim::Tensor, tp}};
}

ProcessMesh ProcessMesh::create(std::shared_ptr<Communicator> world, const MeshShape& shape,
                                const std::vector<std::vector<MeshDim>>& flatten) {
  return create_with_axes(std::move(world), shape.axes(), flatten);
}

ProcessMesh ProcessMesh::create_with_axes(std::shared_ptr<Communicator> world,
                                          std::vector<MeshAxis> axes,
                                          const std::vector<std::vector<MeshDim>>& flatten) {
  if (!world) throw Error(ErrorCode::InvalidArgument, "ProcessMesh::create: the world is null");

  // 1-2. Agree on the inputs, then check them; both verdicts are the same on every rank.
  require_same_records(allgather_records(*world, encode(axes, flatten)));
  ProcessMesh mesh;
  if (std::string problem = mesh_layout::resolve(world->size(), axes, mesh.axes_);
      !problem.empty()) {
    throw Error(ErrorCode::InvalidArgument, "ProcessMesh::create: " + problem);
  }
  mesh.world_ = std::move(world);
  mesh.rank_ = mesh.world_->rank();
  mesh.world_size_ = mesh.world_->size();

  // The groups to build: each dimension, then each flattened set of several dimensions, once,
  // in an order every rank derives alike (sets by ascending mask over the MeshDim values).
  std::vector<Positions> groups;
  for (std::size_t i = 0; i < mesh.axes_.size(); ++i) groups.push_back(Positions{1} << i);
  std::bitset<kMaskCount> requested;
  for (const std::vector<MeshDim>& dims : flatten) {
    if (dim_mask(dims) == 0) {
      throw Error(ErrorCode::InvalidArgument,
                  "ProcessMesh::create: a flattened group must name at least one dimension, "
                  "each once; got [" +
                      list_text(dims) + "]");
    }
    requested.set(dim_mask(dims));
  }
  for (std::uint32_t mask = 1; mask < kMaskCount; ++mask) {
    if (!requested.test(mask)) continue;
    std::vector<MeshDim> dims;
    for (unsigned value = 0; value < kMaxAxes; ++value) {
      if ((mask >> value & 1u) != 0) dims.push_back(static_cast<MeshDim>(value));
    }
    const Positions positions = mesh.positions_of(dims, "ProcessMesh::create: flattened group");
    if (std::find(groups.begin(), groups.end(), positions) == groups.end()) {
      groups.push_back(positions);
    }
  }

  // 3. One communicator per group.
  const std::vector<int> coords = mesh_layout::coords_of(mesh.axes_, mesh.rank_);
  std::shared_ptr<Communicator> self;
  for (Positions group : groups) {
    std::shared_ptr<Communicator> comm;
    if (mesh.world_size_ == 1) {
      comm = mesh.world_;
    } else if (mesh_layout::group_size(mesh.axes_, group) == 1) {
      if (!self) self = mesh.world_->split(mesh.rank_, 0);
      comm = self;
    } else {
      const Positions others = mesh_layout::all_positions(mesh.axes_.size()) & ~group;
      comm = mesh.world_->split(mesh_layout::index_in(mesh.axes_, others, coords),
                                mesh_layout::index_in(mesh.axes_, group, coords));
    }
    mesh.comms_.emplace_back(group, std::move(comm));
  }
  return mesh;
}

bool ProcessMesh::has(MeshDim dim) const noexcept {
  return std::any_of(axes_.begin(), axes_.end(), [&](const MeshAxis& a) { return a.dim == dim; });
}

std::uint32_t ProcessMesh::position_of(MeshDim dim, const char* op) const {
  for (std::size_t i = 0; i < axes_.size(); ++i) {
    if (axes_[i].dim == dim) return Positions{1} << i;
  }
  std::string have;
  for (const MeshAxis& axis : axes_) append(have, ", ", name(axis.dim));
  throw Error(ErrorCode::InvalidArgument, std::string(op) + ": the mesh has no dimension " +
                                              name(dim) + " (it has " + have + ")");
}

std::uint32_t ProcessMesh::positions_of(const std::vector<MeshDim>& dims, const char* op) const {
  if (dims.empty()) {
    throw Error(ErrorCode::InvalidArgument, std::string(op) + ": an empty set of dimensions");
  }
  Positions positions = 0;
  for (MeshDim dim : dims) {
    const Positions one = position_of(dim, op);
    if ((positions & one) != 0) {
      throw Error(ErrorCode::InvalidArgument,
                  std::string(op) + ": dimension " + name(dim) + " is listed twice");
    }
    positions |= one;
  }
  return positions;
}

const std::shared_ptr<Communicator>& ProcessMesh::communicator(std::uint32_t positions,
                                                               const char* op) const {
  for (const auto& [group, comm] : comms_) {
    if (group == positions) return comm;
  }
  std::string dims;
  std::string code;
  for (std::size_t i = 0; i < axes_.size(); ++i) {
    if ((positions >> i & 1u) == 0) continue;
    append(dims, "+", name(axes_[i].dim));
    append(code, ", ", "MeshDim::" + enumerator(axes_[i].dim));
  }
  throw Error(ErrorCode::InvalidUsage, std::string(op) + ": the flattened group " + dims +
                                           " was not built; pass {" + code +
                                           "} in ProcessMesh::create's flatten");
}

int ProcessMesh::size(MeshDim dim) const {
  return mesh_layout::group_size(axes_, position_of(dim, "ProcessMesh::size"));
}

int ProcessMesh::size(const std::vector<MeshDim>& dims) const {
  return mesh_layout::group_size(axes_, positions_of(dims, "ProcessMesh::size"));
}

int ProcessMesh::coord(MeshDim dim) const {
  return mesh_layout::index_in(axes_, position_of(dim, "ProcessMesh::coord"), coords());
}

int ProcessMesh::coord(const std::vector<MeshDim>& dims) const {
  return mesh_layout::index_in(axes_, positions_of(dims, "ProcessMesh::coord"), coords());
}

std::vector<int> ProcessMesh::group_ranks(MeshDim dim) const {
  return group_ranks(std::vector<MeshDim>{dim});
}

std::vector<int> ProcessMesh::group_ranks(const std::vector<MeshDim>& dims) const {
  const Positions group = positions_of(dims, "ProcessMesh::group_ranks");
  const Positions others = mesh_layout::all_positions(axes_.size()) & ~group;
  return mesh_layout::members(axes_, group, mesh_layout::index_in(axes_, others, coords()));
}

std::vector<std::vector<int>> ProcessMesh::all_groups(MeshDim dim) const {
  return all_groups(std::vector<MeshDim>{dim});
}

std::vector<std::vector<int>> ProcessMesh::all_groups(const std::vector<MeshDim>& dims) const {
  const Positions group = positions_of(dims, "ProcessMesh::all_groups");
  const int colors = world_size_ / mesh_layout::group_size(axes_, group);
  std::vector<std::vector<int>> groups;
  groups.reserve(static_cast<std::size_t>(colors));
  for (int color = 0; color < colors; ++color) {
    groups.push_back(mesh_layout::members(axes_, group, color));
  }
  return groups;
}

Communicator& ProcessMesh::comm(MeshDim dim) const {
  return *communicator(position_of(dim, "ProcessMesh::comm"), "ProcessMesh::comm");
}

Communicator& ProcessMesh::comm(const std::vector<MeshDim>& dims) const {
  return *communicator(positions_of(dims, "ProcessMesh::comm"), "ProcessMesh::comm");
}

std::shared_ptr<Communicator> ProcessMesh::comm_ptr(MeshDim dim) const {
  return communicator(position_of(dim, "ProcessMesh::comm_ptr"), "ProcessMesh::comm_ptr");
}

std::shared_ptr<Communicator> ProcessMesh::comm_ptr(const std::vector<MeshDim>& dims) const {
  return communicator(positions_of(dims, "ProcessMesh::comm_ptr"), "ProcessMesh::comm_ptr");
}

std::vector<int> ProcessMesh::coords_of(int rank) const {
  if (rank < 0 || rank >= world_size_) {
    throw Error(ErrorCode::InvalidArgument, "ProcessMesh::coords_of: rank " + std::to_string(rank) +
                                                " is outside the world of " +
                                                std::to_string(world_size_));
  }
  return mesh_layout::coords_of(axes_, rank);
}

int ProcessMesh::rank_of(const std::vector<int>& coords) const {
  if (coords.size() != axes_.size()) {
    throw Error(ErrorCode::InvalidArgument,
                "ProcessMesh::rank_of: " + std::to_string(coords.size()) +
                    " coordinates for a mesh of " + std::to_string(axes_.size()) + " dimensions");
  }
  for (std::size_t i = 0; i < axes_.size(); ++i) {
    if (coords[i] < 0 || coords[i] >= axes_[i].size) {
      throw Error(ErrorCode::InvalidArgument, "ProcessMesh::rank_of: coordinate " +
                                                  std::to_string(coords[i]) + " for " +
                                                  name(axes_[i].dim) + " is outside [0, " +
                                                  std::to_string(axes_[i].size) + ")");
    }
  }
  return mesh_layout::rank_of(axes_, coords);
}

}  // namespace cohort::train
