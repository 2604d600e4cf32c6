// Rank <-> coordinate arithmetic of a process mesh (see mesh_layout.hpp for the formulas).

#include "train/mesh_layout.hpp"

#include <cstdint>
#include <string>

namespace cohort::train::mesh_layout {
namespace {

bool in_group(Positions group, std::size_t position) {
  return position < 32 && (group >> position & 1u) != 0;
}

std::string name(MeshDim dim) {
  return std::string(mesh_dim_name(dim));
}

// "dp=2 x pp=? x tp=4" ("?" for kInferSize).
std::string describe(std::span<const MeshAxis> axes) {
  std::string text;
  for (const MeshAxis& axis : axes) {
    if (!text.empty()) text += " x ";
    text += name(axis.dim) + "=" + (axis.size == kInferSize ? "?" : std::to_string(axis.size));
  }
  return text;
}

// Every dimension a known MeshDim, listed once, with a usable size; at most one inferred.
std::string check_dimensions(std::span<const MeshAxis> axes) {
  if (axes.empty()) return "a mesh needs at least one dimension";
  std::uint32_t seen = 0;
  const MeshAxis* inferred = nullptr;
  for (const MeshAxis& axis : axes) {
    const auto value = static_cast<unsigned>(axis.dim);
    if (value >= kMaxAxes) return "dimension value " + std::to_string(value) + " is not a MeshDim";
    if ((seen >> value & 1u) != 0) return "dimension " + name(axis.dim) + " is listed twice";
    seen |= 1u << value;
    if (axis.size == kInferSize) {
      if (inferred != nullptr) {
        return "both " + name(inferred->dim) + " and " + name(axis.dim) +
               " ask for their size to be inferred (kInferSize); at most one may";
      }
      inferred = &axis;
    } else if (axis.size < 1) {
      return name(axis.dim) + " has size " + std::to_string(axis.size) +
             "; sizes are at least 1, or kInferSize (-1) to take what the world leaves";
    }
  }
  return {};
}

}  // namespace

std::string resolve(int world_size, std::span<const MeshAxis> axes,
                    std::vector<MeshAxis>& resolved) {
  if (std::string problem = check_dimensions(axes); !problem.empty()) return problem;
  // The product of the known sizes, stopping once it exceeds the world (no overflow).
  std::int64_t known = 1;
  const MeshAxis* inferred = nullptr;
  for (const MeshAxis& axis : axes) {
    if (axis.size == kInferSize) {
      inferred = &axis;
    } else if (known <= world_size) {
      known *= axis.size;
    }
  }
  if (inferred == nullptr && known != world_size) {
    return "the sizes " + describe(axes) + " make " +
           (known > world_size ? "more than " + std::to_string(world_size)
                               : std::to_string(known)) +
           " ranks, but the world has " + std::to_string(world_size);
  }
  if (inferred != nullptr && (known > world_size || world_size % known != 0)) {
    return "the world of " + std::to_string(world_size) + " ranks is not a multiple of the " +
           "other sizes in " + describe(axes) + " (product " +
           (known > world_size ? "above " + std::to_string(world_size) : std::to_string(known)) +
           "), so " + name(inferred->dim) + " cannot be inferred";
  }
  resolved.assign(axes.begin(), axes.end());
  for (MeshAxis& axis : resolved) {
    if (axis.size == kInferSize) axis.size = static_cast<int>(world_size / known);
  }
  return {};
}

int group_size(std::span<const MeshAxis> axes, Positions group) {
  int size = 1;
  for (std::size_t i = 0; i < axes.size(); ++i) {
    if (in_group(group, i)) size *= axes[i].size;
  }
  return size;
}

std::vector<int> coords_of(std::span<const MeshAxis> axes, int rank) {
  std::vector<int> coords(axes.size());
  // Peel the fastest dimension off first: it is the remainder of the row-major index.
  for (std::size_t i = axes.size(); i-- > 0;) {
    coords[i] = rank % axes[i].size;
    rank /= axes[i].size;
  }
  return coords;
}

int rank_of(std::span<const MeshAxis> axes, std::span<const int> coords) {
  return index_in(axes, all_positions(axes.size()), coords);
}

int index_in(std::span<const MeshAxis> axes, Positions group, std::span<const int> coords) {
  int index = 0;
  for (std::size_t i = 0; i < axes.size(); ++i) {
    if (in_group(group, i)) index = index * axes[i].size + coords[i];
  }
  return index;
}

std::vector<int> members(std::span<const MeshAxis> axes, Positions group, int color) {
  const Positions others = all_positions(axes.size()) & ~group;
  std::vector<int> coords(axes.size(), 0);
  // The color is the row-major index over the other positions: decode it, fastest first.
  for (std::size_t i = axes.size(); i-- > 0;) {
    if (!in_group(others, i)) continue;
    coords[i] = color % axes[i].size;
    color /= axes[i].size;
  }
  const int size = group_size(axes, group);
  std::vector<int> ranks;
  ranks.reserve(static_cast<std::size_t>(size));
  for (int index = 0; index < size; ++index) {
    int rest = index;
    for (std::size_t i = axes.size(); i-- > 0;) {
      if (!in_group(group, i)) continue;
      coords[i] = rest % axes[i].size;
      rest /= axes[i].size;
    }
    ranks.push_back(rank_of(axes, coords));
  }
  return ranks;
}

}  // namespace cohort::train::mesh_layout
