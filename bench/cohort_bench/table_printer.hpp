#pragma once

// The nccl-tests table on stdout: a header with the run's parameters, one block per
// (op, dtype, redop) with a column header, rows pairing out-of-place and in-place measurements,
// and the trailers "# Out of bounds values" and "# Avg bus bandwidth". Implementation and
// algorithm go in a last column, so tools that read nccl-tests columns by position still work.

#include "results.hpp"

#include <cstdio>
#include <string>
#include <vector>

namespace cohort::bench {

/// The run header (cohort version, host, world size, sweep and timing parameters).
void print_run_header(std::FILE* out, const RunInfo& info);
/// The header of one block: its op, dtype, redop and root, then the column titles.
void print_block_header(std::FILE* out, BenchOp op, DType dtype, ReduceOp redop, int root);
/// One row (flushed, so long sweeps show progress in a pipe).
void print_row(std::FILE* out, const ResultRow& row, bool check);
/// nccl-tests' time column: 2 decimals below 100 us, 1 below 10 ms, none above.
std::string format_time_us(double time_us);
/// The trailers; `peers` lists the peer implementations whose average is also reported.
void print_trailer(std::FILE* out, const std::vector<ResultRow>& rows,
                   const std::vector<std::string>& peers);

}  // namespace cohort::bench
