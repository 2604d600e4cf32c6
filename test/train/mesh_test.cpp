// The process mesh and all_to_all. The layout arithmetic is checked alone against TRAINING.md's
// hand-computed world of 8; the mesh itself on real processes (worlds of 1-4, and the world of 8
// in the 'slow' suite): coordinates, groups and the sums of ranks an allreduce over each group's
// communicator gives, all written out by hand here; every invalid mesh rejected on every rank,
// including when the ranks disagree, followed by a valid mesh to show they stayed in step.

#include "comm/rank_checks.hpp"
#include "train/mesh_layout.hpp"

#include <cohort/train/mesh.hpp>

#include <catch2/catch.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace {

using namespace cohort;
using namespace cohort::test;
using cohort::train::all_to_all;
using cohort::train::kInferSize;
using cohort::train::MeshAxis;
using cohort::train::MeshDim;
using cohort::train::MeshShape;
using cohort::train::ProcessMesh;
namespace layout = cohort::train::mesh_layout;

using Groups = std::vector<std::vector<int>>;

std::string show(const std::vector<int>& values) {
  std::string text = "[";
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i > 0) text += ",";
    text += std::to_string(values[i]);
  }
  return text + "]";
}

std::string show(const Groups& groups) {
  std::string text = "[";
  for (std::size_t i = 0; i < groups.size(); ++i) {
    if (i > 0) text += ",";
    text += show(groups[i]);
  }
  return text + "]";
}

// Sum over the ranks of `comm` of `value`: what TRAINING.md's "sum of ranks over each group" is.
std::int64_t allreduce_sum(Communicator& comm, std::int64_t value) {
  comm.allreduce(Buffer::view(&value, 1, DType::Int64), ReduceOp::Sum);
  return value;
}

// The group in `groups` holding `rank`.
const std::vector<int>& group_of(const Groups& groups, int rank) {
  for (const std::vector<int>& group : groups) {
    for (int member : group) {
      if (member == rank) return group;
    }
  }
  throw std::runtime_error("rank " + std::to_string(rank) + " is in no group of " + show(groups));
}

std::int64_t sum(const std::vector<int>& ranks) {
  std::int64_t total = 0;
  for (int r : ranks) total += r;
  return total;
}

// Every check a mesh owes one dimension, against hand-written groups: this rank's group, every
// group, the communicator's size and this rank's place in it, and the sum of ranks over it.
void check_dimension(const ProcessMesh& mesh, MeshDim dim, const Groups& groups) {
  const std::string what =
      "dim " + std::string(train::mesh_dim_name(dim)) + " at rank " + std::to_string(mesh.rank());
  const std::vector<int>& mine = group_of(groups, mesh.rank());
  RANK_CHECK(mesh.all_groups(dim) == groups, what << ": all groups " << show(mesh.all_groups(dim)));
  RANK_CHECK(mesh.group_ranks(dim) == mine, what << ": group " << show(mesh.group_ranks(dim)));
  RANK_CHECK(mesh.size(dim) == static_cast<int>(mine.size()), what << ": size " << mesh.size(dim));
  RANK_CHECK(mine[static_cast<std::size_t>(mesh.coord(dim))] == mesh.rank(),
             what << ": coord " << mesh.coord(dim));
  Communicator& comm = mesh.comm(dim);
  RANK_CHECK(comm.size() == static_cast<int>(mine.size()), what << ": comm size " << comm.size());
  RANK_CHECK(comm.rank() == mesh.coord(dim), what << ": comm rank " << comm.rank());
  const std::int64_t total = allreduce_sum(comm, mesh.rank());
  RANK_CHECK(total == sum(mine), what << ": sum of ranks " << total << ", expected " << sum(mine));
}

// ---- Layout arithmetic alone.

std::vector<MeshAxis> resolved(int world, const std::vector<MeshAxis>& axes) {
  std::vector<MeshAxis> out;
  const std::string problem = layout::resolve(world, axes, out);
  INFO(problem);
  REQUIRE(problem.empty());
  return out;
}

Groups groups_along(const std::vector<MeshAxis>& axes, layout::Positions group) {
  Groups groups;
  const int colors = 8 / layout::group_size(axes, group);
  for (int color = 0; color < colors; ++color)
    groups.push_back(layout::members(axes, group, color));
  return groups;
}

// TRAINING.md's world of 8 with tp 2, pp 2 in the default order dp, pp, cp, tp.
const Groups kTp8 = {{0, 1}, {2, 3}, {4, 5}, {6, 7}};
const Groups kPp8 = {{0, 2}, {1, 3}, {4, 6}, {5, 7}};
const Groups kDp8 = {{0, 4}, {1, 5}, {2, 6}, {3, 7}};
const Groups kCp8 = {{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}};
const Groups kDpPp8 = {{0, 2, 4, 6}, {1, 3, 5, 7}};

}  // namespace

TEST_CASE("mesh layout: TRAINING.md's world of 8, tp 2 and pp 2 leave dp 2", "[layout]") {
  const std::vector<MeshAxis> axes = resolved(8, MeshShape{.pp = 2, .tp = 2}.axes());
  REQUIRE(axes.size() == 4);
  CHECK(axes[0].dim == MeshDim::Data);
  CHECK(axes[0].size == 2);
  CHECK(axes[1].size == 2);
  CHECK(axes[2].size == 1);
  CHECK(axes[3].dim == MeshDim::Tensor);

  CHECK(layout::coords_of(axes, 5) == std::vector<int>{1, 0, 0, 1});
  CHECK(layout::rank_of(axes, std::vector<int>{1, 0, 0, 1}) == 5);
  CHECK(layout::coords_of(axes, 6) == std::vector<int>{1, 1, 0, 0});

  CHECK(groups_along(axes, 1u << 3) == kTp8);
  CHECK(groups_along(axes, 1u << 1) == kPp8);
  CHECK(groups_along(axes, 1u << 0) == kDp8);
  CHECK(groups_along(axes, 1u << 2) == kCp8);
  CHECK(groups_along(axes, 1u << 0 | 1u << 1) == kDpPp8);
  CHECK(groups_along(axes, 0xFu) == Groups{{0, 1, 2, 3, 4, 5, 6, 7}});
}

TEST_CASE("mesh layout: another order and an inferred inner dimension", "[layout]") {
  // tp slowest: rank = tp * 4 + dp, so tp pairs ranks 4 apart.
  const std::vector<MeshAxis> axes =
      resolved(8, {{MeshDim::Tensor, 2}, {MeshDim::Data, kInferSize}});
  CHECK(axes[1].size == 4);
  CHECK(groups_along(axes, 1u << 0) == Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}});
  CHECK(groups_along(axes, 1u << 1) == Groups{{0, 1, 2, 3}, {4, 5, 6, 7}});
  CHECK(layout::coords_of(axes, 6) == std::vector<int>{1, 2});
}

TEST_CASE("mesh layout: invalid sizes are named", "[layout]") {
  const auto problem = [](int world, const std::vector<MeshAxis>& axes) {
    std::vector<MeshAxis> out;
    return layout::resolve(world, axes, out);
  };
  using Catch::Matchers::Contains;
  // TRAINING.md: world 6 with tp 4.
  CHECK_THAT(problem(6, MeshShape{.tp = 4}.axes()),
             Contains("world of 6 ranks is not a multiple") && Contains("tp=4") &&
                 Contains("dp cannot be inferred"));
  CHECK_THAT(problem(8, {{MeshDim::Data, 2}, {MeshDim::Tensor, 2}}),
             Contains("dp=2 x tp=2 make 4 ranks, but the world has 8"));
  CHECK_THAT(problem(8, {{MeshDim::Data, 4}, {MeshDim::Tensor, 4}}),
             Contains("make more than 8 ranks"));
  CHECK_THAT(problem(8, {{MeshDim::Data, kInferSize}, {MeshDim::Tensor, kInferSize}}),
             Contains("both dp and tp ask for their size to be inferred"));
  CHECK_THAT(problem(8, {{MeshDim::Data, 0}, {MeshDim::Tensor, 8}}), Contains("dp has size 0"));
  CHECK_THAT(problem(8, {{MeshDim::Data, -3}}), Contains("dp has size -3"));
  CHECK_THAT(problem(4, {{MeshDim::Tensor, 2}, {MeshDim::Tensor, 2}}),
             Contains("dimension tp is listed twice"));
  CHECK_THAT(problem(4, {}), Contains("at least one dimension"));
  CHECK_THAT(problem(4, {{static_cast<MeshDim>(9), 4}}), Contains("value 9 is not a MeshDim"));
  CHECK(problem(1, {{MeshDim::Data, kInferSize}}).empty());
}

TEST_CASE("mesh: worlds of 1-4 in the default order, dp inferred", "[mesh]") {
  // Data parallelism takes the whole world; every other dimension has size 1.
  const int world_size = GENERATE(1, 2, 3, 4);
  CAPTURE(world_size);
  const std::map<int, Groups> dp = {
      {1, {{0}}}, {2, {{0, 1}}}, {3, {{0, 1, 2}}}, {4, {{0, 1, 2, 3}}}};
  REQUIRE_NOTHROW(run_ranks(world_size, [&](const Environment& env) {
    const ProcessMesh mesh = ProcessMesh::create(world(env));
    RANK_CHECK(mesh.size(MeshDim::Data) == world_size, "dp size " << mesh.size(MeshDim::Data));
    RANK_CHECK(mesh.coords() == (std::vector<int>{env.rank, 0, 0, 0}), show(mesh.coords()));
    check_dimension(mesh, MeshDim::Data, dp.at(world_size));
    Groups alone;
    for (int r = 0; r < world_size; ++r) alone.push_back({r});
    for (MeshDim dim : {MeshDim::Pipeline, MeshDim::Context, MeshDim::Tensor}) {
      check_dimension(mesh, dim, alone);
    }
    // Every group of one rank is served by one communicator of this rank alone.
    RANK_CHECK(&mesh.comm(MeshDim::Tensor) == &mesh.comm(MeshDim::Pipeline), "self shared");
    if (world_size == 1) RANK_CHECK(&mesh.comm(MeshDim::Data) == &mesh.world(), "world of one");
  }));
}

TEST_CASE("mesh: 4 ranks with tp 2 and pp 2, flattened groups", "[mesh]") {
  REQUIRE_NOTHROW(run_ranks(4, [](const Environment& env) {
    const ProcessMesh mesh = ProcessMesh::create(
        world(env), {.pp = 2, .tp = 2},
        {{MeshDim::Tensor, MeshDim::Pipeline}, {MeshDim::Data, MeshDim::Pipeline}});
    const std::vector<std::vector<int>> coords = {
        {0, 0, 0, 0}, {0, 0, 0, 1}, {0, 1, 0, 0}, {0, 1, 0, 1}};
    RANK_CHECK(mesh.coords() == coords[static_cast<std::size_t>(env.rank)], show(mesh.coords()));
    RANK_CHECK(mesh.rank_of(coords[3]) == 3, "rank_of");
    check_dimension(mesh, MeshDim::Tensor, {{0, 1}, {2, 3}});
    check_dimension(mesh, MeshDim::Pipeline, {{0, 2}, {1, 3}});
    check_dimension(mesh, MeshDim::Data, {{0}, {1}, {2}, {3}});

    // pp x tp (written in either order) is the whole world, its coordinate the rank.
    const std::vector<MeshDim> model = {MeshDim::Pipeline, MeshDim::Tensor};
    RANK_CHECK(mesh.size(model) == 4 && mesh.coord(model) == env.rank, "pp x tp coord");
    RANK_CHECK(mesh.group_ranks(model) == (std::vector<int>{0, 1, 2, 3}), "pp x tp group");
    RANK_CHECK(allreduce_sum(mesh.comm({MeshDim::Tensor, MeshDim::Pipeline}), env.rank) == 6,
               "pp x tp sum");
    RANK_CHECK(mesh.comm(model).rank() == env.rank, "pp x tp comm rank");
    // dp x pp: dp has size 1, so the same ranks as pp.
    const std::vector<MeshDim> dp_pp = {MeshDim::Data, MeshDim::Pipeline};
    RANK_CHECK(mesh.all_groups(dp_pp) == (Groups{{0, 2}, {1, 3}}), show(mesh.all_groups(dp_pp)));
    RANK_CHECK(allreduce_sum(mesh.comm(dp_pp), env.rank) == (env.rank % 2 == 0 ? 2 : 4),
               "dp x pp sum");

    // Queries outside the mesh, and a group nobody asked to build.
    expect_error([&] { mesh.size(MeshDim::Expert); }, ErrorCode::InvalidArgument,
                 {"no dimension ep", "dp, pp, cp, tp"}, "size(ep)");
    expect_error(
        [&] {
          mesh.comm({MeshDim::Data, MeshDim::Tensor});
        },
        ErrorCode::InvalidUsage, {"dp+tp was not built", "{MeshDim::Data, MeshDim::Tensor}"},
        "comm(dp x tp)");
    expect_error([&] { mesh.group_ranks(std::vector<MeshDim>{}); }, ErrorCode::InvalidArgument,
                 {"empty set"}, "group_ranks({})");
    expect_error(
        [&] {
          mesh.coord({MeshDim::Tensor, MeshDim::Tensor});
        },
        ErrorCode::InvalidArgument, {"tp is listed twice"}, "coord(tp, tp)");
    expect_error(
        [&] {
          mesh.rank_of({0, 1, 0});
        },
        ErrorCode::InvalidArgument, {"3 coordinates for a mesh of 4"}, "rank_of 3 coords");
    expect_error(
        [&] {
          mesh.rank_of({0, 2, 0, 0});
        },
        ErrorCode::InvalidArgument, {"coordinate 2 for pp is outside [0, 2)"}, "rank_of pp 2");
    expect_error([&] { mesh.coords_of(4); }, ErrorCode::InvalidArgument,
                 {"rank 4 is outside the world of 4"}, "coords_of(4)");
  }));
}

TEST_CASE("mesh: dimensions in another order", "[mesh]") {
  // tp slowest, dp fastest: rank = tp * 2 + dp.
  REQUIRE_NOTHROW(run_ranks(4, [](const Environment& env) {
    const ProcessMesh mesh = ProcessMesh::create_with_axes(
        world(env), {{MeshDim::Tensor, 2}, {MeshDim::Data, kInferSize}});
    RANK_CHECK(mesh.size(MeshDim::Data) == 2, "dp inferred");
    check_dimension(mesh, MeshDim::Tensor, {{0, 2}, {1, 3}});
    check_dimension(mesh, MeshDim::Data, {{0, 1}, {2, 3}});
  }));
}

TEST_CASE("mesh: an invalid mesh fails on every rank, even when only one rank passed it",
          "[mesh]") {
  REQUIRE_NOTHROW(run_ranks(3, [](const Environment& env) {
    const std::shared_ptr<Communicator> comm = world(env);
    // The same invalid sizes everywhere: tp 2 does not divide 3.
    expect_error([&] { ProcessMesh::create(comm, {.tp = 2}); }, ErrorCode::InvalidArgument,
                 {"world of 3 ranks is not a multiple", "tp=2"}, "tp 2 in a world of 3");
    // Only rank 2 passes an invalid size; ranks 0 and 1 would be fine on their own.
    const MeshShape shape = env.rank == 2 ? MeshShape{.tp = 0} : MeshShape{.tp = 3};
    expect_error([&] { ProcessMesh::create(comm, shape); }, ErrorCode::InvalidArgument,
                 {"the ranks passed different meshes", "ranks 0, 1: dp=? x pp=1 x cp=1 x tp=3",
                  "rank 2: dp=? x pp=1 x cp=1 x tp=0"},
                 "rank 2 alone invalid");
    // Different flattened groups.
    const std::vector<std::vector<MeshDim>> flatten =
        env.rank == 1 ? std::vector<std::vector<MeshDim>>{{MeshDim::Context, MeshDim::Data}}
                      : std::vector<std::vector<MeshDim>>{};
    expect_error([&] { ProcessMesh::create(comm, MeshShape{}, flatten); },
                 ErrorCode::InvalidArgument, {"rank 1: dp=? x pp=1 x cp=1 x tp=1, flatten [dp+cp]"},
                 "flatten on rank 1");
    // Flattened groups the mesh cannot have.
    expect_error(
        [&] {
          ProcessMesh::create(comm, MeshShape{}, {{MeshDim::Data, MeshDim::Expert}});
        },
        ErrorCode::InvalidArgument, {"no dimension ep"}, "flatten dp x ep");
    expect_error(
        [&] {
          ProcessMesh::create(comm, MeshShape{}, {{MeshDim::Tensor, MeshDim::Tensor}});
        },
        ErrorCode::InvalidArgument, {"each once; got [tp, tp]"}, "flatten tp x tp");
    expect_error([&] { ProcessMesh::create(nullptr); }, ErrorCode::InvalidArgument,
                 {"the world is null"}, "null world");

    // Still in step: a valid mesh after the failures works.
    const ProcessMesh mesh = ProcessMesh::create(comm, {.tp = 3});
    check_dimension(mesh, MeshDim::Tensor, {{0, 1, 2}});
  }));
}

TEST_CASE("all_to_all: TRAINING.md's two ranks, and twice gives the input back", "[all_to_all]") {
  REQUIRE_NOTHROW(run_ranks(2, [](const Environment& env) {
    const std::shared_ptr<Communicator> comm = world(env);
    const std::vector<std::vector<std::int64_t>> in = {{0, 1, 2, 3}, {4, 5, 6, 7}};
    const std::vector<std::vector<std::int64_t>> expected = {{0, 1, 4, 5}, {2, 3, 6, 7}};
    const auto r = static_cast<std::size_t>(env.rank);
    std::vector<std::int64_t> mine = in[r];
    std::vector<std::int64_t> out(4, -1);
    all_to_all(*comm, Buffer::view(mine.data(), 4, DType::Int64),
               Buffer::view(out.data(), 4, DType::Int64));
    RANK_CHECK(out == expected[r], "once: element 2 is " << out[2]);

    // Its own adjoint: applying it to the result gives the input back (here into a new buffer,
    // through the mesh's cp dimension, which spans both ranks).
    const ProcessMesh mesh = ProcessMesh::create(comm, {.dp = 1, .cp = 2});
    const Buffer twice =
        all_to_all(mesh.comm(MeshDim::Context), Buffer::view(out.data(), 4, DType::Int64));
    expect_values(
        twice, 0, 4, [&](std::size_t i) { return static_cast<double>(in[r][i]); }, "twice");
    std::vector<std::int64_t> again(4, -1);
    all_to_all(mesh, MeshDim::Context, Buffer::view(mine.data(), 4, DType::Int64),
               Buffer::view(again.data(), 4, DType::Int64));
    RANK_CHECK(again == expected[r], "through the mesh");
  }));
}

TEST_CASE("all_to_all: rows of 2-d buffers on 1, 3 and 4 ranks, in place too", "[all_to_all]") {
  const int world_size = GENERATE(1, 3, 4);
  CAPTURE(world_size);
  REQUIRE_NOTHROW(run_ranks(world_size, [world_size](const Environment& env) {
    const std::shared_ptr<Communicator> comm = world(env);
    // 2 rows of 3 per destination; value = 100 * sender + 10 * row + column.
    const std::int64_t rows = 2 * world_size;
    const auto value = [](int sender, std::int64_t row, std::int64_t col) {
      return static_cast<double>(100 * sender + 10 * row + col);
    };
    Buffer in = Buffer::allocate({rows, 3}, DType::Int32);
    for (std::int64_t i = 0; i < rows * 3; ++i) {
      set(in, static_cast<std::size_t>(i), value(env.rank, i / 3, i % 3));
    }
    // Row i of the output is row (2 * rank + i % 2) of sender i / 2.
    const auto expected = [&](std::size_t i) {
      const auto row = static_cast<std::int64_t>(i / 3);
      return value(static_cast<int>(row / 2), 2 * env.rank + row % 2,
                   static_cast<std::int64_t>(i % 3));
    };
    const Buffer out = all_to_all(*comm, in);
    RANK_CHECK(out.shape() == in.shape(), "shape kept");
    expect_values(out, 0, out.count(), expected, "out of place");
    all_to_all(*comm, in, in);
    expect_values(in, 0, in.count(), expected, "in place");
  }));
}

TEST_CASE("all_to_all: rows not divisible by the group, and other bad buffers", "[all_to_all]") {
  REQUIRE_NOTHROW(run_ranks(3, [](const Environment& env) {
    const std::shared_ptr<Communicator> comm = world(env);
    // 12 elements would split evenly, 4 rows would not: rows are never cut between ranks.
    const Buffer four = Buffer::allocate({4, 3}, DType::Float32);
    expect_error([&] { all_to_all(*comm, four); }, ErrorCode::InvalidArgument,
                 {"dim 0 of the input [4, 3] (4) is not divisible by the group size 3"},
                 "4 rows on 3 ranks");
    float scalar = 1;
    const Buffer zero_d =
        Buffer::view(&scalar, std::vector<std::int64_t>{}, DType::Float32, Device::cpu());
    expect_error([&] { all_to_all(*comm, zero_d); }, ErrorCode::InvalidArgument, {"0-d"}, "0-d");
    const Buffer six = Buffer::allocate({6}, DType::Float32);
    expect_error(
        [&] {
          all_to_all(*comm, six, Buffer::allocate({3, 2}, DType::Float32));
        },
        ErrorCode::InvalidArgument, {"output [3, 2] float differs from the input [6] float"},
        "shape mismatch");
    expect_error([&] { all_to_all(*comm, six, Buffer::allocate({6}, DType::Int32)); },
                 ErrorCode::InvalidArgument, {"int32 differs"}, "dtype mismatch");
    const Buffer on_gpu =
        Buffer::view(reinterpret_cast<void*>(0x1000), 6, DType::Float32, Device::cuda(0));
    expect_error([&] { all_to_all(*comm, on_gpu); }, ErrorCode::Unsupported,
                 {"the input is on device cuda:0"}, "cuda input");
    expect_error([&] { all_to_all(*comm, six, on_gpu); }, ErrorCode::Unsupported,
                 {"the output is on device cuda:0"}, "cuda output");
    expect_error([&] { all_to_all(*comm, six, six.as_read_only()); }, ErrorCode::InvalidArgument,
                 {"the output is read-only"}, "read-only output");
    // Nothing moved above, so the ranks are still in step.
    const Buffer ok = all_to_all(*comm, six);
    RANK_CHECK(ok.count() == 6, "after the errors");
  }));
}

TEST_CASE("mesh: TRAINING.md's world of 8 with tp 2 and pp 2", "[mesh][slow]") {
  REQUIRE_NOTHROW(run_ranks(8, [](const Environment& env) {
    const ProcessMesh mesh =
        ProcessMesh::create(world(env), {.pp = 2, .tp = 2}, {{MeshDim::Data, MeshDim::Pipeline}});
    RANK_CHECK(mesh.size(MeshDim::Data) == 2, "dp inferred as " << mesh.size(MeshDim::Data));
    RANK_CHECK(mesh.rank_of({1, 0, 0, 1}) == 5, "rank_of(1, 0, 0, 1)");
    check_dimension(mesh, MeshDim::Tensor, kTp8);
    check_dimension(mesh, MeshDim::Pipeline, kPp8);
    check_dimension(mesh, MeshDim::Data, kDp8);
    check_dimension(mesh, MeshDim::Context, kCp8);
    RANK_CHECK(mesh.all_groups({MeshDim::Data, MeshDim::Pipeline}) == kDpPp8, "dp x pp groups");
    const std::int64_t dp_pp =
        allreduce_sum(mesh.comm({MeshDim::Data, MeshDim::Pipeline}), env.rank);
    RANK_CHECK(dp_pp == sum(group_of(kDpPp8, env.rank)), "dp x pp sum " << dp_pp);
    if (env.rank == 5) {
      RANK_CHECK(mesh.coords() == (std::vector<int>{1, 0, 0, 1}), show(mesh.coords()));
      RANK_CHECK(mesh.coord(MeshDim::Data) == 1 && mesh.coord(MeshDim::Pipeline) == 0 &&
                     mesh.coord(MeshDim::Tensor) == 1,
                 "rank 5 = (dp 1, pp 0, tp 1)");
    }
    // TRAINING.md's sums at rank 5, through each dimension's communicator.
    const std::int64_t tp = allreduce_sum(mesh.comm(MeshDim::Tensor), env.rank);
    const std::int64_t pp = allreduce_sum(mesh.comm(MeshDim::Pipeline), env.rank);
    const std::int64_t dp = allreduce_sum(mesh.comm(MeshDim::Data), env.rank);
    if (env.rank == 5) RANK_CHECK(tp == 9 && pp == 12 && dp == 6, tp << " " << pp << " " << dp);
  }));
}

TEST_CASE("mesh: TRAINING.md's world of 6 with tp 4 fails on every rank", "[mesh][slow]") {
  REQUIRE_NOTHROW(run_ranks(6, [](const Environment& env) {
    const std::shared_ptr<Communicator> comm = world(env);
    expect_error([&] { ProcessMesh::create(comm, {.tp = 4}); }, ErrorCode::InvalidArgument,
                 {"world of 6 ranks is not a multiple", "tp=4"}, "tp 4 in a world of 6");
    comm->barrier();
  }));
}
