#include "bench_driver.hpp"

#include "cohort_implementation.hpp"
#include "progress.hpp"
#include "result_files.hpp"
#include "runner.hpp"
#include "svg_plot.hpp"
#include "table_printer.hpp"

#if COHORT_BENCH_HAVE_MPI
#include "mpi_peer.hpp"
#endif
#if COHORT_BENCH_HAVE_GLOO
#include "gloo_peer.hpp"
#endif
#if COHORT_BENCH_HAVE_CUDA
#include "nccl_peer.hpp"
#endif
#include "device_memory.hpp"

#include <cohort/communicator.hpp>
#include <cohort/environment.hpp>
#include <cohort/error.hpp>
#include <cohort/store.hpp>
#include <cohort/tunables.hpp>
#include <cohort/version.hpp>

#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <memory>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cohort::bench {
namespace {

std::string host_name() {
  char name[HOST_NAME_MAX + 1] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "unknown";
  return name;
}

void require_rank(const char* what, int value, int world_size) {
  if (value < 0 || value >= world_size) {
    throw Error(ErrorCode::InvalidArgument, std::string(what) + ": rank " + std::to_string(value) +
                                                " is outside the world of " +
                                                std::to_string(world_size) + " ranks");
  }
}

// A store of the peer's own (keys under cohort-bench/<peer>) for its rendezvous.
[[maybe_unused]] std::shared_ptr<Store> peer_store(const char* peer) {
  const Environment env = resolve_environment();
  if (env.world_size > 1 && env.store_addr.empty()) {
    // Without a published store address, connect_store() would host a second store on rank 0
    // and the ranks could meet at different ones.
    throw Error(ErrorCode::InvalidUsage,
                std::string("--peer ") + peer +
                    " needs a launcher that publishes the store address (cohort-run or "
                    "torchrun)");
  }
  return std::make_shared<PrefixStore>(std::string("cohort-bench/") + peer, connect_store(env));
}

std::unique_ptr<Implementation> make_gloo(const Communicator& comm) {
#if COHORT_BENCH_HAVE_GLOO
  return make_gloo_peer(peer_store("gloo"), comm.rank(), comm.size(), comm.default_timeout());
#else
  (void)comm;
  throw Error(ErrorCode::Unsupported, "--peer gloo: this cohort-bench was built without Gloo");
#endif
}

// This rank's CUDA device for --device cuda (before any communicator, so a missing device is
// refused before a rank waits for its peers).
std::unique_ptr<DeviceMemory> open_device(BenchDevice device) {
  if (device == BenchDevice::Cpu) return nullptr;
#if COHORT_BENCH_HAVE_CUDA
  return open_cuda_device(resolve_environment().local_rank);
#else
  throw Error(ErrorCode::Unsupported,
              "--device cuda: this cohort-bench was built without CUDA (cohort was configured "
              "without the CUDA toolkit and NCCL; rebuild with -Dcuda=enabled)");
#endif
}

std::unique_ptr<Implementation> make_nccl(const Communicator& comm) {
#if COHORT_BENCH_HAVE_CUDA
  return make_nccl_peer(peer_store("nccl"), comm.rank(), comm.size(), comm.default_timeout());
#else
  (void)comm;
  throw Error(ErrorCode::Unsupported,
              "--peer nccl: this cohort-bench was built without CUDA and NCCL");
#endif
}

// The cohort algorithms to time for `op`: every applicable one with --algos all, the forced one
// where it applies with --algo, otherwise the selection table's choice.
std::vector<Algorithm> cohort_algorithms(const BenchOptions& o, BenchOp op) {
  if (o.all_algorithms) {
    const auto algos = op_algorithms(op);
    if (!algos.empty()) return {algos.begin(), algos.end()};
  }
  if (o.algorithm && algorithm_applies(op, *o.algorithm)) return {*o.algorithm};
  return {Algorithm::Auto};
}

// The blocks of the table: each op with each dtype and, for reductions, each reduction.
std::vector<BenchCase> make_blocks(const BenchOptions& o) {
  std::vector<BenchCase> blocks;
  for (BenchOp op : o.ops) {
    if (op == BenchOp::Barrier) {
      blocks.push_back({op, o.dtypes.front(), o.redops.front(), o.root});
      continue;
    }
    for (DType dtype : o.dtypes) {
      if (!op_reduces(op)) {
        blocks.push_back({op, dtype, o.redops.front(), o.root});
        continue;
      }
      for (ReduceOp redop : o.redops) blocks.push_back({op, dtype, redop, o.root});
    }
  }
  return blocks;
}

/// The arguments as given (before MPI_Init may take its own out), separated by spaces.
std::string command_line_of(int argc, char** argv) {
  std::string line;
  for (int i = 0; i < argc; ++i) {
    if (i) line += ' ';
    line += argv[i];
  }
  return line;
}

std::string utc_now_iso8601() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  ::gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

/// The tunables set in this process's environment (describe_tunables() names them all), sorted:
/// what a result depends on besides the command line. Not the launcher's placement variables,
/// and never the store's secret token.
std::vector<std::pair<std::string, std::string>> cohort_variables() {
  std::vector<std::pair<std::string, std::string>> found;
  std::istringstream lines(describe_tunables());
  for (std::string line; std::getline(lines, line);) {
    const std::string name = line.substr(0, line.find(' '));
    if (name.empty() || name == "COHORT_TOKEN") continue;
    if (const char* value = std::getenv(name.c_str())) found.emplace_back(name, value);
  }
  std::sort(found.begin(), found.end());
  return found;
}

}  // namespace

int run_benchmark(const BenchOptions& o, int* argc, char*** argv) {
  const std::string command_line = command_line_of(*argc, *argv);
#if COHORT_BENCH_HAVE_MPI
  // MPI starts before cohort and ends after it (declared first, destroyed last).
  std::unique_ptr<MpiRuntime> mpi;
  if (o.peer == Peer::Mpi) mpi = std::make_unique<MpiRuntime>(argc, argv);
#else
  (void)argc;
  (void)argv;
  if (o.peer == Peer::Mpi) {
    throw Error(ErrorCode::Unsupported, "--peer mpi: this cohort-bench was built without MPI");
  }
#endif
  // The device is current on this thread before cohort or NCCL touch it.
  const std::unique_ptr<DeviceMemory> device = open_device(o.device);
  std::shared_ptr<Communicator> comm = init();
  const int rank = comm->rank(), world_size = comm->size();
  require_rank("--root", o.root, world_size);
  if (o.run.inject_wrong_rank) require_rank("--inject-wrong", *o.run.inject_wrong_rank, world_size);

  CohortImplementation cohort_impl(comm);
  std::unique_ptr<Implementation> peer;
#if COHORT_BENCH_HAVE_MPI
  if (o.peer == Peer::Mpi) peer = make_mpi_peer(rank, world_size);
#endif
  if (o.peer == Peer::Gloo) peer = make_gloo(*comm);
  if (o.peer == Peer::Nccl) peer = make_nccl(*comm);
  std::vector<std::string> peer_names;
  if (peer) peer_names.emplace_back(peer->name());

  const bool printer = rank == 0;
  RunInfo info;
  info.world_size = world_size;
  info.hostname = host_name();
  info.cohort_version = kVersion;
  info.op = o.op_arg;
  info.dtype = o.dtype_arg;
  info.redop = o.redop_arg;
  info.root = o.root;
  info.peer = peer_name(o.peer);
  info.device = device ? device->describe() : bench_device_name(o.device);
  info.sweep = o.sweep_description();
  info.warmup = o.run.warmup;
  info.iters = o.run.iters;
  info.min_time_s = o.run.min_time_s;
  info.fresh_input = o.run.fresh_input;
  info.mappable = o.run.mappable;
  info.allocate_per_call = o.run.allocate_per_call;
  info.check = o.run.check;
  info.average = static_cast<int>(o.run.average);
  info.command = command_line;
  info.date = utc_now_iso8601();
  info.tunables = cohort_variables();
  if (printer) print_run_header(stdout, info);

  const std::vector<std::uint64_t> sizes = make_sweep(o.sweep);
  const std::vector<BenchCase> blocks = make_blocks(o);
  std::size_t total_steps = 0;
  for (const auto& b : blocks) total_steps += b.op == BenchOp::Barrier ? 1 : sizes.size();
  ProgressReporter progress(printer, total_steps);
  Runner runner(*comm, o.run, device.get());
  std::vector<ResultRow> all_rows;
  std::size_t done = 0;
  for (const BenchCase& block : blocks) {
    std::vector<Contender> contenders;
    for (Algorithm a : cohort_algorithms(o, block.op)) contenders.push_back({&cohort_impl, a});
    if (peer) contenders.push_back({peer.get(), Algorithm::Auto});
    if (printer) print_block_header(stdout, block.op, block.dtype, block.redop, block.root);
    const std::vector<std::uint64_t> block_sizes =
        block.op == BenchOp::Barrier ? std::vector<std::uint64_t>{0} : sizes;
    for (std::uint64_t size : block_sizes) {
      // Cohort and the peer run back to back at each size, so both see the same machine state.
      for (ResultRow& row : runner.run_size(block, size, contenders)) {
        if (printer) print_row(stdout, row, o.run.check);
        all_rows.push_back(std::move(row));
      }
      progress.step(++done,
                    std::string(bench_op_name(block.op)) + " " + std::to_string(size) + " B");
    }
  }
  progress.finish();

  if (printer) {
    print_trailer(stdout, all_rows, peer_names);
    if (!o.json_path.empty()) write_text_file(o.json_path, results_json(info, all_rows));
    if (!o.csv_path.empty()) write_text_file(o.csv_path, results_csv(all_rows));
    if (!o.plot_path.empty()) write_text_file(o.plot_path, busbw_plot_svg(info, all_rows));
  }
  // Wrong counts are already summed over ranks, so every rank exits with the same code.
  return total_wrong(all_rows) > 0 ? 1 : 0;
}

}  // namespace cohort::bench
