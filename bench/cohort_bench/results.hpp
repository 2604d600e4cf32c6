#pragma once

// One table row: an implementation (and cohort algorithm) at one size of one op, with its
// out-of-place and in-place measurements. The table printer and the JSON, CSV and SVG writers
// all read these.

#include "ops.hpp"

#include <cohort/dtype.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace cohort::bench {

struct Measurement {
  /// False when the form was not run: the op has no in-place form, or the row is skipped.
  bool measured = false;
  double time_us = 0.0;
  double algbw_gbps = 0.0;  ///< size_bytes / time, GB = 1e9 bytes
  double busbw_gbps = 0.0;  ///< algbw * busbw_factor(op, world size)
  std::uint64_t wrong = 0;  ///< wrong elements summed over ranks (0 when not checked)
  int iters = 0;            ///< timed calls (--min-time picks them per size, contender and form)
  /// For a forced cohort algorithm: the one that ran, when it declined the arguments and the
  /// selection table chose another (empty when the forced one ran, or nothing was forced).
  std::string declined_for;
};

struct ResultRow {
  std::string impl;  ///< "cohort", "mpi", "gloo", "nccl"
  std::string algo;  ///< cohort's algorithm name ("auto", "ring", ...); "default" for peers
  BenchOp op = BenchOp::Allreduce;
  DType dtype = DType::Float32;
  ReduceOp redop = ReduceOp::Sum;  ///< meaningful only when op_reduces(op)
  int root = 0;                    ///< meaningful only when op_has_root(op)
  std::size_t size_bytes = 0;
  std::size_t count = 0;
  Measurement out_of_place;
  Measurement in_place;
  /// Non-empty when this implementation cannot run the combination (nothing measured).
  std::string skipped;
};

/// What a run was asked to do, for the table header and the JSON/CSV files.
struct RunInfo {
  int world_size = 1;
  std::string hostname;
  std::string cohort_version;
  std::string op;     ///< the --op argument ("allreduce", "all", ...)
  std::string dtype;  ///< the --datatype argument
  std::string redop;  ///< the --redop argument
  int root = 0;
  std::string peer;  ///< "none", "mpi", "gloo", "nccl"
  /// "cpu", or this rank 0's CUDA device as DeviceMemory::describe() says ("cuda:0 (...)").
  std::string device = "cpu";
  std::string sweep;  ///< e.g. "minBytes 8 maxBytes 1048576 step: 2(factor)"
  int warmup = 0;
  int iters = 0;
  double min_time_s = 0.0;
  bool fresh_input = false;
  bool mappable = false;           ///< cohort's host buffers from Buffer::allocate_mappable
  bool allocate_per_call = false;  ///< buffers allocated, written and freed around each call
  bool check = true;
  int average = 1;
  std::string command;  ///< the command line, arguments separated by spaces
  std::string date;     ///< when the run started, UTC, ISO 8601
  /// Every COHORT_* variable of rank 0's environment, sorted by name: the tunables the run used.
  std::vector<std::pair<std::string, std::string>> tunables;
};

/// The "redop" column: the op's name, or "none" for ops that do not reduce.
std::string redop_label(const ResultRow& row);
/// The "root" column: the root, or -1 for ops without one (as nccl-tests prints).
int root_label(const ResultRow& row);
/// "cohort", "cohort/ring", "mpi": implementation plus a forced cohort algorithm.
std::string impl_label(const ResultRow& row);

/// Mean busbw over every measured row and form of `impl` that moves data (nccl-tests'
/// "Avg bus bandwidth").
double average_busbw(const std::vector<ResultRow>& rows, const std::string& impl);
/// Wrong elements summed over every row and form.
std::uint64_t total_wrong(const std::vector<ResultRow>& rows);

}  // namespace cohort::bench
