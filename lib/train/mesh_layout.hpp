#pragma once

// The arithmetic of a process mesh, apart from any communicator: resolving and checking the
// sizes, and the row-major mapping between world ranks and coordinates, per group of dimensions.
// Pure functions, so the hand-computed layouts are tested without processes.
//
// A rank is the row-major index of its coordinates: with sizes s_0 .. s_{n-1} (slowest first),
// rank = sum_i c_i * stride_i where stride_i = s_{i+1} * ... * s_{n-1}. A group is a set of
// dimension positions (a bitmask over the axes); a rank's coordinate in the group is the
// row-major index of its coordinates in those positions, its color the row-major index of its
// coordinates in the others. Two ranks are in the same group exactly when their colors match.

#include <cohort/train/mesh.hpp>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace cohort::train::mesh_layout {

/// Bit i stands for axes[i].
using Positions = std::uint32_t;

/// The most dimensions a mesh can have: each MeshDim at most once.
inline constexpr std::size_t kMaxAxes = 8;

/// Checks `axes` for a world of `world_size` and resolves kInferSize. Returns what is wrong
/// (empty when nothing is, and then `resolved` holds the axes with every size known). The text
/// names the offending sizes and the world size; it is the same on every rank given the same
/// inputs.
std::string resolve(int world_size, std::span<const MeshAxis> axes,
                    std::vector<MeshAxis>& resolved);

/// All positions of a mesh of `count` axes.
inline Positions all_positions(std::size_t count) {
  return count >= 32 ? ~Positions{0} : (Positions{1} << count) - 1;
}

/// Number of ranks in each group over `group` (product of those sizes).
int group_size(std::span<const MeshAxis> axes, Positions group);
/// The coordinates of world rank `rank`, one per axis. `rank` must be in the world.
std::vector<int> coords_of(std::span<const MeshAxis> axes, int rank);
/// The world rank at `coords` (one per axis, each within its size).
int rank_of(std::span<const MeshAxis> axes, std::span<const int> coords);
/// The row-major index of `coords` restricted to the positions in `group`.
int index_in(std::span<const MeshAxis> axes, Positions group, std::span<const int> coords);
/// The ranks of the group over `group` whose other coordinates have row-major index `color`,
/// ordered by their index in the group.
std::vector<int> members(std::span<const MeshAxis> axes, Positions group, int color);

}  // namespace cohort::train::mesh_layout
