// cohort-mesh-bench: what a process mesh costs to create, in time and in process resources.
//
// A mesh is one split of the world per dimension (see train/mesh.hpp), so this measures how
// cheap sub-communicators are. Per repetition, every rank times
//   create   ProcessMesh::create(world, shape) until it returned (the mesh's communicators exist)
//   first    one 4-byte allreduce on each dimension's communicator, in mesh order: the first op
//            on a fresh communicator (a shared arena, if that communicator uses one, is set up
//            here; later ops reuse it)
//   again    the same allreduces once more (the steady state, for comparison)
// and the table shows, per phase, the median over repetitions of the maximum over ranks. One
// barrier on the world (median of many, timed the same way) is the unit the times are also given
// in. Threads and open file descriptors of the process are counted from /proc before the first
// mesh, with a mesh alive after its first ops, and after every mesh was destroyed: a
// sub-communicator that brought its own UCX worker, endpoints or progress thread shows up there.
//
// Usage (under cohort-run, mpirun or torchrun):
//   cohort-run -n 8 -- cohort-mesh-bench --pp 2 --tp 2 [--cp 1] [--repeat 20] [--json out.json]

#include <cohort/cohort.hpp>
#include <cohort/train.hpp>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/// The largest of every rank's `seconds`.
double max_over_ranks(cohort::Communicator& world, double seconds) {
  world.allreduce(cohort::Buffer::view(&seconds, 1, cohort::DType::Float64), cohort::ReduceOp::Max);
  return seconds;
}

std::size_t entries(const char* directory) {
  std::size_t n = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(directory)) ++n;
  return n;
}

struct Resources {
  std::size_t threads = 0;
  std::size_t fds = 0;
};

Resources resources() {
  return {entries("/proc/self/task"), entries("/proc/self/fd")};
}

/// Times `fn` on every rank from a common start; the slowest rank's time.
template <class F>
double timed(cohort::Communicator& world, F&& fn) {
  world.barrier();
  const auto start = Clock::now();
  fn();
  return max_over_ranks(world, std::chrono::duration<double>(Clock::now() - start).count());
}

void allreduce_each_dimension(const cohort::train::ProcessMesh& mesh) {
  for (const cohort::train::MeshAxis& axis : mesh.axes()) {
    float one = 1.0f;
    mesh.comm(axis.dim).allreduce(cohort::Buffer::view(&one, 1, cohort::DType::Float32),
                                  cohort::ReduceOp::Sum);
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"cohort-mesh-bench: the cost of creating a process mesh"};
  cohort::train::MeshShape shape;
  int repeat = 20;
  int barriers = 2000;
  std::string json_path;
  app.add_option("--pp", shape.pp, "pipeline-parallel size")->check(CLI::PositiveNumber);
  app.add_option("--cp", shape.cp, "context-parallel size")->check(CLI::PositiveNumber);
  app.add_option("--tp", shape.tp, "tensor-parallel size")->check(CLI::PositiveNumber);
  app.add_option("--repeat", repeat, "meshes created and destroyed")->check(CLI::PositiveNumber);
  app.add_option("--barriers", barriers, "barriers timed for the unit")->check(CLI::PositiveNumber);
  app.add_option("--json", json_path, "also write the results here (rank 0)");
  CLI11_PARSE(app, argc, argv);

  try {
    std::shared_ptr<cohort::Communicator> world = cohort::init();
    const bool main_rank = world->rank() == 0;
    for (int i = 0; i < 100; ++i) world->barrier();
    std::vector<double> barrier_times;
    for (int i = 0; i < barriers; ++i)
      barrier_times.push_back(timed(*world, [&] { world->barrier(); }));
    const double barrier = median(barrier_times);

    const Resources before = resources();
    Resources alive;
    std::vector<double> create, first, again;
    for (int r = 0; r < repeat; ++r) {
      std::optional<cohort::train::ProcessMesh> mesh;
      create.push_back(
          timed(*world, [&] { mesh = cohort::train::ProcessMesh::create(world, shape); }));
      first.push_back(timed(*world, [&] { allreduce_each_dimension(*mesh); }));
      again.push_back(timed(*world, [&] { allreduce_each_dimension(*mesh); }));
      if (r == repeat - 1) alive = resources();
    }
    world->barrier();
    const Resources after = resources();

    // Every rank's resource counts, for the table's worst case.
    std::vector<std::int64_t> mine{
        static_cast<std::int64_t>(alive.threads) - static_cast<std::int64_t>(before.threads),
        static_cast<std::int64_t>(alive.fds) - static_cast<std::int64_t>(before.fds),
        static_cast<std::int64_t>(after.threads) - static_cast<std::int64_t>(before.threads),
        static_cast<std::int64_t>(after.fds) - static_cast<std::int64_t>(before.fds)};
    world->allreduce(cohort::Buffer::view(mine.data(), mine.size(), cohort::DType::Int64),
                     cohort::ReduceOp::Max);

    if (main_rank) {
      const double c = median(create), f = median(first), a = median(again);
      std::printf(
          "# cohort-mesh-bench: %d ranks, mesh dp x pp x cp x tp = %d x %d x %d x %d, "
          "%d repetitions\n",
          world->size(), world->size() / (shape.pp * shape.cp * shape.tp), shape.pp, shape.cp,
          shape.tp, repeat);
      std::printf("%-34s %12s %12s\n", "phase (median of max over ranks)", "time (us)", "barriers");
      std::printf("%-34s %12.1f %12.1f\n", "one barrier on the world", barrier * 1e6, 1.0);
      std::printf("%-34s %12.1f %12.1f\n", "create the mesh", c * 1e6, c / barrier);
      std::printf("%-34s %12.1f %12.1f\n", "first allreduce on each dimension", f * 1e6,
                  f / barrier);
      std::printf("%-34s %12.1f %12.1f\n", "later allreduce on each dimension", a * 1e6,
                  a / barrier);
      std::printf(
          "threads added per process (max over ranks): %lld with a mesh alive, %lld "
          "after all were destroyed\n",
          static_cast<long long>(mine[0]), static_cast<long long>(mine[2]));
      std::printf(
          "file descriptors added per process (max over ranks): %lld with a mesh alive, "
          "%lld after all were destroyed\n",
          static_cast<long long>(mine[1]), static_cast<long long>(mine[3]));
      if (!json_path.empty()) {
        nlohmann::json out = {
            {"ranks", world->size()},
            {"shape", {{"pp", shape.pp}, {"cp", shape.cp}, {"tp", shape.tp}}},
            {"repeat", repeat},
            {"barrier_us", barrier * 1e6},
            {"create_us", c * 1e6},
            {"first_ops_us", f * 1e6},
            {"later_ops_us", a * 1e6},
            {"threads_added_alive", mine[0]},
            {"fds_added_alive", mine[1]},
            {"threads_added_after", mine[2]},
            {"fds_added_after", mine[3]},
        };
        std::ofstream(json_path) << out.dump(2) << '\n';
      }
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cohort-mesh-bench: %s\n", e.what());
    return 1;
  }
}
