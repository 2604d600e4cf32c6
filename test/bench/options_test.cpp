// The command line: nccl-tests flags and defaults, cohort-bench's own flags, and errors that
// name the bad value.

#include "options.hpp"

#include <cohort/error.hpp>

#include <CLI/CLI.hpp>
#include <catch2/catch.hpp>

using namespace cohort;
using namespace cohort::bench;
using Args = std::vector<std::string>;

namespace {

std::string invalid_argument_message(const Args& args) {
  try {
    parse_bench_options(args);
  } catch (const Error& e) {
    if (e.code() == ErrorCode::InvalidArgument) return e.message();
    return "wrong code: " + std::string(e.what());
  }
  return "";
}

}  // namespace

TEST_CASE("defaults match nccl-tests", "[bench][options]") {
  const BenchOptions o = parse_bench_options({});
  CHECK(o.ops == std::vector<BenchOp>{BenchOp::Allreduce});
  CHECK(o.dtypes == std::vector<DType>{DType::Float32});
  CHECK(o.redops == std::vector<ReduceOp>{ReduceOp::Sum});
  CHECK(o.sweep.min_bytes == 8);
  CHECK(o.sweep.max_bytes == 64ull << 20);
  CHECK(o.sweep.step_factor == 2);
  CHECK(o.sweep.step_bytes == 0);
  CHECK(o.run.warmup == 5);
  CHECK(o.run.iters == 20);
  CHECK(o.run.check);
  CHECK(o.run.average == Averaging::Mean);
  CHECK(o.root == 0);
  CHECK(o.peer == Peer::None);
  CHECK_FALSE(o.algorithm.has_value());
  CHECK_FALSE(o.all_algorithms);
  CHECK_FALSE(o.run.inject_wrong_rank.has_value());
  CHECK_FALSE(o.run.fresh_input);
  CHECK_FALSE(o.run.allocate_per_call);
  CHECK(o.sweep_description() == "minBytes 8 maxBytes 67108864 step: 2(factor)");
}

TEST_CASE("short and long flags set every field", "[bench][options]") {
  const BenchOptions o = parse_bench_options({"-o",
                                              "allgather",
                                              "-b",
                                              "1K",
                                              "-e",
                                              "4M",
                                              "-f",
                                              "4",
                                              "-d",
                                              "half",
                                              "-r",
                                              "max",
                                              "-w",
                                              "1",
                                              "-n",
                                              "7",
                                              "-c",
                                              "0",
                                              "-a",
                                              "3",
                                              "--root",
                                              "2",
                                              "--min-time",
                                              "0.5",
                                              "--fresh-input",
                                              "--json",
                                              "r.json",
                                              "--csv",
                                              "r.csv",
                                              "--plot",
                                              "r.svg",
                                              "--peer",
                                              "gloo",
                                              "--inject-wrong",
                                              "1"});
  CHECK(o.ops == std::vector<BenchOp>{BenchOp::Allgather});
  CHECK(o.sweep.min_bytes == 1024);
  CHECK(o.sweep.max_bytes == 4ull << 20);
  CHECK(o.sweep.step_factor == 4);
  CHECK(o.dtypes == std::vector<DType>{DType::Float16});
  CHECK(o.redops == std::vector<ReduceOp>{ReduceOp::Max});
  CHECK(o.run.warmup == 1);
  CHECK(o.run.iters == 7);
  CHECK_FALSE(o.run.check);
  CHECK(o.run.average == Averaging::Max);
  CHECK(o.root == 2);
  CHECK(o.run.min_time_s == 0.5);
  CHECK(o.run.fresh_input);
  CHECK(o.json_path == "r.json");
  CHECK(parse_bench_options({"--allocate-per-call"}).run.allocate_per_call);
  CHECK(o.csv_path == "r.csv");
  CHECK(o.plot_path == "r.svg");
  CHECK(o.peer == Peer::Gloo);
  CHECK(o.run.inject_wrong_rank == 1);

  const BenchOptions s = parse_bench_options({"--stepbytes", "1K", "--maxbytes", "4K"});
  CHECK(s.sweep.step_bytes == 1024);
  CHECK(s.sweep_description() == "minBytes 8 maxBytes 4096 step: 1024(bytes)");
}

TEST_CASE("'all' expands ops, dtypes and reductions", "[bench][options]") {
  const BenchOptions o = parse_bench_options({"-o", "all", "-d", "all", "-r", "all"});
  CHECK(o.ops.size() == 10);
  CHECK(o.dtypes.size() == 10);
  CHECK(o.redops.size() == 5);
  CHECK(o.op_arg == "all");
}

TEST_CASE("algorithm flags", "[bench][options]") {
  CHECK(parse_bench_options({"-o", "broadcast", "--algo", "tree"}).algorithm == Algorithm::Tree);
  CHECK(parse_bench_options({"--algos", "all"}).all_algorithms);
  // With several ops, an algorithm only has to apply to one of them.
  CHECK(parse_bench_options({"-o", "all", "--algo", "bruck"}).algorithm == Algorithm::Bruck);
  CHECK(invalid_argument_message({"-o", "broadcast", "--algo", "ring"}).find("ring") !=
        std::string::npos);
  CHECK(invalid_argument_message({"--algo", "quantum"}).find("quantum") != std::string::npos);
  // The refusal lists every algorithm name, the newest included.
  CHECK(invalid_argument_message({"--algo", "quantum"})
            .find("shared_memory|hierarchical|single_copy") != std::string::npos);
  CHECK(invalid_argument_message({"--algos", "some"}).find("some") != std::string::npos);
  CHECK_THROWS_AS(parse_bench_options({"--algo", "ring", "--algos", "all"}), CLI::ParseError);
}

TEST_CASE("bad values are errors naming the value", "[bench][options]") {
  CHECK(invalid_argument_message({"-o", "allreduc"}).find("allreduc") != std::string::npos);
  CHECK(invalid_argument_message({"-d", "fp8_e4m3"}).find("fp8_e4m3") != std::string::npos);
  CHECK(invalid_argument_message({"-d", "quad"}).find("quad") != std::string::npos);
  CHECK(invalid_argument_message({"-r", "band"}).find("band") != std::string::npos);
  CHECK(invalid_argument_message({"--peer", "rccl"}).find("rccl") != std::string::npos);
  CHECK(invalid_argument_message({"--device", "rocm"}).find("rocm") != std::string::npos);
  CHECK(invalid_argument_message({"-b", "12X"}).find("12X") != std::string::npos);
  const std::string min_over_max = invalid_argument_message({"-b", "2M", "-e", "1M"});
  CHECK(min_over_max.find("2097152") != std::string::npos);
  CHECK_FALSE(invalid_argument_message({"-i", "0"}).empty());
  CHECK_FALSE(invalid_argument_message({"-f", "1"}).empty());
}

TEST_CASE("--device and --peer nccl parse, and peers are refused on the wrong device",
          "[bench][options]") {
  CHECK(parse_bench_options({}).device == BenchDevice::Cpu);
  CHECK(parse_bench_options({"--device", "cpu"}).device == BenchDevice::Cpu);
  const BenchOptions cuda = parse_bench_options({"--device", "cuda"});
  CHECK(cuda.device == BenchDevice::Cuda);
  CHECK(cuda.peer == Peer::None);
  const BenchOptions nccl = parse_bench_options({"--device", "cuda", "--peer", "nccl"});
  CHECK(nccl.peer == Peer::Nccl);
  CHECK(std::string(peer_name(nccl.peer)) == "nccl");
  CHECK(std::string(bench_device_name(BenchDevice::Cuda)) == "cuda");

  CHECK(invalid_argument_message({"--peer", "nccl"}) ==
        "--peer nccl: NCCL runs on CUDA buffers; add --device cuda");
  CHECK(invalid_argument_message({"--peer", "nccl", "--device", "cpu"}) ==
        "--peer nccl: NCCL runs on CUDA buffers; add --device cuda");
  CHECK(invalid_argument_message({"--device", "cuda", "--peer", "mpi"}) ==
        "--peer mpi: this peer runs on host buffers only; with --device cuda use --peer nccl");
  CHECK(invalid_argument_message({"--device", "cuda", "--peer", "gloo"}) ==
        "--peer gloo: this peer runs on host buffers only; with --device cuda use --peer nccl");
  CHECK(invalid_argument_message({"--device", "cuda", "--fresh-input"}) ==
        "--fresh-input: rewrites host buffers; not with --device cuda");
  CHECK(invalid_argument_message({"--fresh-input", "--allocate-per-call"}) ==
        "--allocate-per-call: writes a fresh input before every call already; not with "
        "--fresh-input");
  CHECK(invalid_argument_message({"--device", "cuda", "--allocate-per-call"}) ==
        "--allocate-per-call: allocates host buffers; not with --device cuda");
}

TEST_CASE("malformed flags are CLI11 parse errors", "[bench][options]") {
  CHECK_THROWS_AS(parse_bench_options({"-c", "2"}), CLI::ParseError);
  CHECK_THROWS_AS(parse_bench_options({"-a", "4"}), CLI::ParseError);
  CHECK_THROWS_AS(parse_bench_options({"-n", "0"}), CLI::ParseError);
  CHECK_THROWS_AS(parse_bench_options({"-w", "-1"}), CLI::ParseError);
  CHECK_THROWS_AS(parse_bench_options({"-f", "4", "-i", "1K"}), CLI::ParseError);
  CHECK_THROWS_AS(parse_bench_options({"--no-such-flag"}), CLI::ParseError);
  CHECK_THROWS_AS(parse_bench_options({"--help"}), CLI::CallForHelp);
}
