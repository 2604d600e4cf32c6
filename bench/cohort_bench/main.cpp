// cohort-bench: nccl-tests style bandwidth and correctness benchmark of cohort's collectives,
// optionally side by side with MPI, Gloo or raw NCCL. Launch it under cohort-run, mpirun, srun or
// torchrun (or alone, as a world of one). See options.hpp for the flags.

#include "bench_driver.hpp"
#include "options.hpp"

#include <cohort/error.hpp>

#include <cstdio>
#include <exception>

int main(int argc, char** argv) {
  cohort::bench::BenchOptions options;
  try {
    if (auto exit_code = cohort::bench::parse_command_line(argc, argv, options)) return *exit_code;
    return cohort::bench::run_benchmark(options, &argc, &argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cohort-bench: error: %s\n", e.what());
    return 2;
  }
}
