#pragma once

// cohort-bench's command line (CLI11), compatible with nccl-tests' flags where they overlap:
// -o/-b/-e/-f/-i/-d/-r/-w/-n/-c/-a keep their nccl-tests meaning; --root, --algo, --algos,
// --peer, --device, --min-time, --json, --csv and --plot are cohort-bench's own.

#include "ops.hpp"
#include "runner.hpp"
#include "size_sweep.hpp"

#include <cohort/algorithm.hpp>
#include <cohort/dtype.hpp>

#include <optional>
#include <string>
#include <vector>

namespace cohort::bench {

/// The dtypes --datatype accepts (and `all` sweeps), in nccl-tests order.
inline constexpr DType kBenchDTypes[] = {
    DType::Float32, DType::Float64, DType::Float16, DType::BFloat16, DType::Int8,
    DType::UInt8,   DType::Int32,   DType::UInt32,  DType::Int64,    DType::UInt64};
/// The reductions --redop accepts (and `all` sweeps).
inline constexpr ReduceOp kBenchReduceOps[] = {ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Min,
                                               ReduceOp::Max, ReduceOp::Avg};

enum class Peer { None, Mpi, Gloo, Nccl };
const char* peer_name(Peer peer) noexcept;

/// Where the benchmark's buffers live (--device): host memory, or this rank's CUDA device
/// (LOCAL_RANK % device count), where cohort runs its ops on NCCL.
enum class BenchDevice { Cpu, Cuda };
const char* bench_device_name(BenchDevice device) noexcept;

struct BenchOptions {
  std::string op_arg = "allreduce", dtype_arg = "float", redop_arg = "sum";
  std::vector<BenchOp> ops{BenchOp::Allreduce};
  std::vector<DType> dtypes{DType::Float32};
  std::vector<ReduceOp> redops{ReduceOp::Sum};
  int root = 0;
  SweepSpec sweep;
  RunSettings run;
  /// --algo NAME: force this algorithm on every op it applies to.
  std::optional<Algorithm> algorithm;
  /// --algos all: one row block per applicable algorithm.
  bool all_algorithms = false;
  Peer peer = Peer::None;
  BenchDevice device = BenchDevice::Cpu;
  std::string json_path, csv_path, plot_path;

  /// "minBytes 8 maxBytes 67108864 step: 2(factor)" as nccl-tests prints it.
  std::string sweep_description() const;
};

/// Parses the arguments after the program name. Throws CLI::ParseError for malformed flags
/// (including --help, which CLI11 reports as CLI::CallForHelp) and Error(InvalidArgument)
/// naming the value for unknown ops, dtypes, reductions, algorithms, peers, devices or sizes,
/// and for a peer that cannot run on the chosen device (nccl needs --device cuda; mpi and gloo
/// take host buffers only). Whether CUDA is built and a device present is checked at run time.
BenchOptions parse_bench_options(std::vector<std::string> args);

/// For main(): parses argv; on --help or a parse error prints what CLI11 prints and returns the
/// exit code to end with; on --print-env prints describe_tunables() and returns 0 (before any
/// launcher or rank is needed); otherwise nullopt with `out` filled.
std::optional<int> parse_command_line(int argc, const char* const* argv, BenchOptions& out);

}  // namespace cohort::bench
