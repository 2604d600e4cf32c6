#include "options.hpp"

#include <cohort/error.hpp>
#include <cohort/tunables.hpp>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <iostream>

namespace cohort::bench {
namespace {

[[noreturn]] void bad_value(const std::string& flag, const std::string& value,
                            const std::string& accepted) {
  throw Error(ErrorCode::InvalidArgument,
              flag + ": unknown value '" + value + "' (accepted: " + accepted + ")");
}

std::vector<BenchOp> parse_ops(const std::string& text) {
  if (text == "all") return {std::begin(kAllBenchOps), std::end(kAllBenchOps)};
  if (auto op = bench_op_from_name(text)) return {*op};
  bad_value("--op", text,
            "allreduce|broadcast|reduce|allgather|reduce_scatter|alltoall|gather|scatter|"
            "sendrecv|barrier|all");
}

std::vector<DType> parse_dtypes(const std::string& text) {
  if (text == "all") return {std::begin(kBenchDTypes), std::end(kBenchDTypes)};
  const auto dtype = dtype_from_name(text);
  if (dtype && std::find(std::begin(kBenchDTypes), std::end(kBenchDTypes), *dtype) !=
                   std::end(kBenchDTypes)) {
    return {*dtype};
  }
  bad_value("--datatype", text,
            "float|double|half|bfloat16|int8|uint8|int32|uint32|int64|uint64|all");
}

std::vector<ReduceOp> parse_redops(const std::string& text) {
  if (text == "all") return {std::begin(kBenchReduceOps), std::end(kBenchReduceOps)};
  const auto op = reduce_op_from_name(text);
  if (op && std::find(std::begin(kBenchReduceOps), std::end(kBenchReduceOps), *op) !=
                std::end(kBenchReduceOps)) {
    return {*op};
  }
  bad_value("--redop", text, "sum|prod|min|max|avg|all");
}

Peer parse_peer(const std::string& text) {
  if (text == "none") return Peer::None;
  if (text == "mpi") return Peer::Mpi;
  if (text == "gloo") return Peer::Gloo;
  if (text == "nccl") return Peer::Nccl;
  bad_value("--peer", text, "mpi|gloo|nccl|none");
}

BenchDevice parse_device(const std::string& text) {
  if (text == "cpu") return BenchDevice::Cpu;
  if (text == "cuda") return BenchDevice::Cuda;
  bad_value("--device", text, "cpu|cuda");
}

// NCCL runs on device buffers only; the MPI and Gloo peers are built for host buffers.
void check_peer_device(Peer peer, BenchDevice device) {
  if (peer == Peer::Nccl && device != BenchDevice::Cuda)
    throw Error(ErrorCode::InvalidArgument,
                "--peer nccl: NCCL runs on CUDA buffers; add --device cuda");
  if ((peer == Peer::Mpi || peer == Peer::Gloo) && device == BenchDevice::Cuda)
    throw Error(ErrorCode::InvalidArgument,
                std::string("--peer ") + peer_name(peer) +
                    ": this peer runs on host buffers only; with --device cuda use --peer nccl");
}

}  // namespace

const char* peer_name(Peer peer) noexcept {
  switch (peer) {
    case Peer::Mpi: return "mpi";
    case Peer::Gloo: return "gloo";
    case Peer::Nccl: return "nccl";
    case Peer::None: break;
  }
  return "none";
}

const char* bench_device_name(BenchDevice device) noexcept {
  return device == BenchDevice::Cuda ? "cuda" : "cpu";
}

std::string BenchOptions::sweep_description() const {
  std::string step = sweep.step_bytes > 0 ? std::to_string(sweep.step_bytes) + "(bytes)"
                                          : std::to_string(sweep.step_factor) + "(factor)";
  return "minBytes " + std::to_string(sweep.min_bytes) + " maxBytes " +
         std::to_string(sweep.max_bytes) + " step: " + step;
}

namespace {

// The CLI11 app and the raw values it fills, kept together so that help and errors are printed
// by the same app that parsed.
struct CommandLine {
  CommandLine();
  BenchOptions parse(std::vector<std::string> args);

  CLI::App app{"cohort-bench: nccl-tests style benchmark of cohort's collectives", "cohort-bench"};
  BenchOptions o;
  std::string min_bytes = "8", max_bytes = "64M", step_bytes, algo, algos, peer = "none",
              device = "cpu";
  std::uint64_t step_factor = 2;
  int check = 1, average = 1;
  std::optional<int> inject;
  bool print_env = false;
};

CommandLine::CommandLine() {
  app.add_option("-o,--op", o.op_arg,
                 "allreduce|broadcast|reduce|allgather|reduce_scatter|alltoall|gather|scatter|"
                 "sendrecv|barrier|all")
      ->capture_default_str();
  app.add_option("-b,--minbytes", min_bytes, "smallest size (K, M, G are powers of 1024)")
      ->capture_default_str();
  app.add_option("-e,--maxbytes", max_bytes, "largest size")->capture_default_str();
  auto* factor_opt =
      app.add_option("-f,--stepfactor", step_factor, "multiply the size by this between steps")
          ->capture_default_str();
  auto* step_opt = app.add_option("-i,--stepbytes", step_bytes, "add this many bytes per step");
  factor_opt->excludes(step_opt);
  app.add_option("-d,--datatype", o.dtype_arg,
                 "float|double|half|bfloat16|int8|uint8|int32|uint32|int64|uint64|all")
      ->capture_default_str();
  app.add_option("-r,--redop", o.redop_arg, "sum|prod|min|max|avg|all")->capture_default_str();
  app.add_option("--root", o.root, "root rank of broadcast, reduce, gather, scatter")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("-w,--warmup", o.run.warmup, "untimed calls before each timed loop")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("-n,--iters", o.run.iters, "timed calls per size and form")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--min-time", o.run.min_time_s,
                 "raise iters per size so each timed loop lasts at least this many seconds")
      ->check(CLI::NonNegativeNumber);
  app.add_flag("--fresh-input", o.run.fresh_input,
               "rewrite the input before every timed call and time the calls alone (each after a "
               "barrier), as freshly computed data; host buffers only");
  app.add_flag(
      "--mappable", o.run.mappable,
      "cohort's host buffers from Buffer::allocate_mappable, which the ranks of a host map "
      "and work on in place; a peer's (--peer) stay ordinary memory");
  app.add_flag("--allocate-per-call", o.run.allocate_per_call,
               "allocate the buffers before every timed call (mappable ones with --mappable), "
               "write the input and free them after, timing all three, each call alone after a "
               "barrier: a program that allocates per step; host buffers only");
  app.add_option("-c,--check", check, "check results: 0|1")
      ->capture_default_str()
      ->check(CLI::Range(0, 1));
  app.add_option("-a,--average", average, "combine ranks' times: 0 rank 0, 1 mean, 2 min, 3 max")
      ->capture_default_str()
      ->check(CLI::Range(0, 3));
  auto* algo_opt = app.add_option("--algo", algo, "force this cohort algorithm (ring, tree, ...)");
  auto* algos_opt = app.add_option("--algos", algos, "'all': one block per applicable algorithm");
  algo_opt->excludes(algos_opt);
  app.add_option("--peer", peer,
                 "also run a peer library: mpi|gloo|nccl|none (nccl: raw NCCL "
                 "calls, with --device cuda)")
      ->capture_default_str();
  app.add_option("--device", device,
                 "where buffers live: cpu|cuda (cuda: one GPU per rank, LOCAL_RANK % device "
                 "count; needs cohort built with CUDA)")
      ->capture_default_str();
  app.add_option("--json", o.json_path, "write all rows to this JSON file (rank 0)");
  app.add_option("--csv", o.csv_path, "write all rows to this CSV file (rank 0)");
  app.add_option("--plot", o.plot_path, "write busbw against size to this SVG file (rank 0)");
  app.add_option("--inject-wrong", inject,
                 "TEST ONLY: this rank corrupts its output after each checked call, so the "
                 "check must report wrong values")
      ->group("Testing")
      ->check(CLI::NonNegativeNumber);
  app.add_flag("--print-env", print_env,
               "print every COHORT_* tunable (value, default, meaning) and exit; needs no ranks");
}

BenchOptions CommandLine::parse(std::vector<std::string> args) {
  std::reverse(args.begin(), args.end());  // CLI11 consumes a reversed vector
  app.parse(args);

  o.ops = parse_ops(o.op_arg);
  o.dtypes = parse_dtypes(o.dtype_arg);
  o.redops = parse_redops(o.redop_arg);
  o.sweep.min_bytes = parse_size(min_bytes, "--minbytes");
  o.sweep.max_bytes = parse_size(max_bytes, "--maxbytes");
  o.sweep.step_factor = step_factor;
  if (!step_bytes.empty()) {
    o.sweep.step_bytes = parse_size(step_bytes, "--stepbytes");
    if (o.sweep.step_bytes == 0) {
      throw Error(ErrorCode::InvalidArgument, "--stepbytes: must be positive, got 0");
    }
  }
  make_sweep(o.sweep);  // rejects min > max and degenerate steps before anything starts
  o.run.check = check != 0;
  o.run.average = static_cast<Averaging>(average);
  o.run.inject_wrong_rank = inject;
  if (!algo.empty()) {
    const auto a = algorithm_from_name(algo);
    if (!a) {
      // The library's own names, so the list cannot fall behind its algorithms.
      std::string names;
      for (int i = 0; i < kAlgorithmCount; ++i)
        names += (i ? "|" : "") + std::string(algorithm_name(static_cast<Algorithm>(i)));
      bad_value("--algo", algo, names);
    }
    const bool applies = std::any_of(o.ops.begin(), o.ops.end(),
                                     [&](BenchOp op) { return algorithm_applies(op, *a); });
    if (!applies) {
      throw Error(ErrorCode::InvalidArgument,
                  "--algo: algorithm '" + algo + "' does not apply to op '" + o.op_arg + "'");
    }
    o.algorithm = *a;
  }
  if (!algos.empty()) {
    if (algos != "all") bad_value("--algos", algos, "all");
    o.all_algorithms = true;
  }
  o.peer = parse_peer(peer);
  o.device = parse_device(device);
  check_peer_device(o.peer, o.device);
  if (o.run.fresh_input && o.device == BenchDevice::Cuda)
    throw Error(ErrorCode::InvalidArgument,
                "--fresh-input: rewrites host buffers; not with --device cuda");
  if (o.run.allocate_per_call && o.run.fresh_input)
    throw Error(ErrorCode::InvalidArgument,
                "--allocate-per-call: writes a fresh input before every call already; not with "
                "--fresh-input");
  if (o.run.allocate_per_call && o.device == BenchDevice::Cuda)
    throw Error(ErrorCode::InvalidArgument,
                "--allocate-per-call: allocates host buffers; not with --device cuda");
  if (o.run.mappable && o.device == BenchDevice::Cuda)
    throw Error(ErrorCode::InvalidArgument,
                "--mappable: allocates host buffers; not with --device cuda");
  return o;
}

}  // namespace

BenchOptions parse_bench_options(std::vector<std::string> args) {
  CommandLine command_line;
  return command_line.parse(std::move(args));
}

std::optional<int> parse_command_line(int argc, const char* const* argv, BenchOptions& out) {
  CommandLine command_line;
  try {
    out = command_line.parse(std::vector<std::string>(argv + 1, argv + argc));
    if (command_line.print_env) {
      std::cout << describe_tunables();
      return 0;
    }
    return std::nullopt;
  } catch (const CLI::ParseError& e) {
    // CLI11's own printing: help on stdout, errors on stderr, with its exit code.
    return command_line.app.exit(e);
  }
}

}  // namespace cohort::bench
