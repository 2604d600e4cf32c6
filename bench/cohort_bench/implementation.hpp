#pragma once

// What the runner times: one library's way of running a collective. cohort itself and each peer
// library (MPI, Gloo, NCCL) implement this, so the sweep, the check and the output are shared.

#include "ops.hpp"

#include <cohort/algorithm.hpp>
#include <cohort/device.hpp>
#include <cohort/dtype.hpp>

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace cohort::bench {

/// One collective call: which op, on what, and with which cohort algorithm (peers ignore it).
struct OpCall {
  BenchOp op = BenchOp::Allreduce;
  DType dtype = DType::Float32;
  ReduceOp redop = ReduceOp::Sum;
  int root = 0;
  Algorithm algorithm = Algorithm::Auto;
  bool in_place = false;
  /// Input and output, laid out as op_shape() describes (for in-place, both point into the one
  /// buffer at in_offset and out_offset). in_count/out_count are elements.
  void* in = nullptr;
  void* out = nullptr;
  std::size_t in_count = 0;
  std::size_t out_count = 0;
  /// Where in and out live: host memory, or a CUDA device (--device cuda).
  Device device = Device::cpu();
};

class Implementation {
 public:
  virtual ~Implementation() = default;

  /// "cohort", "mpi", "gloo", "nccl": the impl column of the table and JSON.
  virtual std::string_view name() const noexcept = 0;
  /// Why this library cannot run `call` (shape and pointers aside), or nullopt when it can.
  virtual std::optional<std::string> unsupported(const OpCall& call) const = 0;
  /// Runs `call` to completion (blocking) on every rank. Throws on failure.
  virtual void run(const OpCall& call) = 0;
};

}  // namespace cohort::bench
