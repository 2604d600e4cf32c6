#pragma once

// The whole run: start the communicator (and MPI for --peer mpi), build the contenders, sweep
// every (op, dtype, redop) block over the sizes, print the table on rank 0 and write the files.

#include "options.hpp"

namespace cohort::bench {

/// Runs the benchmark described by `options`; returns the process exit code: 0 when every
/// checked element was right, 1 when any was wrong. Throws on errors (bad root, peer missing
/// from this build, communicator failures).
int run_benchmark(const BenchOptions& options, int* argc, char*** argv);

}  // namespace cohort::bench
