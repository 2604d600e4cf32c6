// Reducing and gathering per-rank results (metrics.hpp): reduce, gather_rows,
// all_gather_stacked, pad_across, gather_for_metrics.
//
// The gathering helpers share one shape: exchange_inputs (shape_exchange.hpp) tells every rank
// every rank's dtype, shape and agreed arguments; each helper then validates those exchanged facts
// (so every rank reaches the same verdict and throws together) and only then moves data, with
// one allgather or allgatherv whose counts every rank already knows.

#include <cohort/error.hpp>
#include <cohort/train/metrics.hpp>

#include "buffer_checks.hpp"
#include "shape_exchange.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cohort::train {
namespace {

// A 0-d buffer is one row of one element, as torch's gather treats a scalar ([None]).
std::vector<std::int64_t> as_rows(const std::vector<std::int64_t>& shape) {
  return shape.empty() ? std::vector<std::int64_t>{1} : shape;
}

// "rank 0 <what(0)>, rank 1 <what(1)>, ..."
std::string per_rank(const std::vector<RankInput>& inputs,
                     const std::function<std::string(const RankInput&)>& what) {
  std::string out;
  for (std::size_t r = 0; r < inputs.size(); ++r) {
    out += fmt::format("{}rank {} {}", r > 0 ? ", " : "", r, what(inputs[r]));
  }
  return out;
}

std::string shape_of(const RankInput& input) {
  return shape_string(input.shape);
}

void require_same_dtype(std::string_view op, const std::vector<RankInput>& inputs) {
  for (const RankInput& input : inputs) {
    if (input.dtype != inputs[0].dtype) {
      throw Error(ErrorCode::InvalidArgument, fmt::format("{}: the ranks' dtypes differ: {}", op,
                                                          per_rank(inputs, [](const RankInput& i) {
                                                            return std::string(dtype_name(i.dtype));
                                                          })));
    }
  }
}

// Concatenation along dim 0 of the exchanged inputs (this rank's is `in`), after checking that
// the dtypes and the trailing dimensions agree.
Buffer gather_exchanged(Communicator& comm, std::string_view op, const Buffer& in,
                        const std::vector<RankInput>& inputs) {
  require_same_dtype(op, inputs);
  const std::vector<std::int64_t> first = as_rows(inputs[0].shape);
  std::int64_t rows = 0;
  for (const RankInput& input : inputs) {
    const std::vector<std::int64_t> shape = as_rows(input.shape);
    if (shape.size() != first.size() ||
        !std::equal(shape.begin() + 1, shape.end(), first.begin() + 1)) {
      throw Error(ErrorCode::InvalidArgument,
                  fmt::format("{}: the ranks' shapes differ beyond dim 0 (a 0-d buffer counts as "
                              "[1]): {}",
                              op, per_rank(inputs, shape_of)));
    }
    rows += shape[0];
  }

  std::vector<std::int64_t> shape = first;
  shape[0] = rows;
  Buffer out = Buffer::allocate(shape, inputs[0].dtype);
  if (out.count() == 0) return out;
  if (comm.size() == 1) {
    std::memcpy(out.data(), in.data(), in.nbytes());
    return out;
  }
  // Rank r contributes rows_r whole rows of `inner` elements each.
  const auto inner = static_cast<std::size_t>(out.count() / static_cast<std::size_t>(rows));
  std::vector<std::size_t> counts(inputs.size());
  for (std::size_t r = 0; r < inputs.size(); ++r) {
    counts[r] = static_cast<std::size_t>(as_rows(inputs[r].shape)[0]) * inner;
  }
  comm.allgatherv(host_flat(in), out.flat(), counts);
  return out;
}

}  // namespace

Buffer reduce(Communicator& comm, const Buffer& in, ReduceOp op) {
  require_host("reduce", "the buffer", in);
  require_contiguous("reduce", "the buffer", in, /*written=*/false);
  // Checked here rather than left to allreduce so that a world of one, which never calls it,
  // rejects the same operators.
  if (!reduce_op_supports(op, in.dtype())) {
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("reduce: operator {} is not defined on dtype {}", reduce_op_name(op),
                            dtype_name(in.dtype())));
  }

  Buffer out = Buffer::allocate(in.shape(), in.dtype());
  if (out.count() == 0) return out;
  if (comm.size() == 1) {
    // op over one contribution is the contribution itself, for every operator (Avg divides by 1).
    std::memcpy(out.data(), in.data(), in.nbytes());
    return out;
  }
  comm.allreduce(host_flat(in), out.flat(), op);
  return out;
}

Buffer gather_rows(Communicator& comm, const Buffer& in) {
  constexpr std::string_view kOp = "gather_rows";
  return gather_exchanged(comm, kOp, in, exchange_inputs(comm, kOp, in));
}

Buffer all_gather_stacked(Communicator& comm, const Buffer& in) {
  constexpr std::string_view kOp = "all_gather_stacked";
  const std::vector<RankInput> inputs = exchange_inputs(comm, kOp, in);
  require_same_dtype(kOp, inputs);
  for (const RankInput& input : inputs) {
    if (input.shape != inputs[0].shape) {
      throw Error(ErrorCode::InvalidArgument,
                  fmt::format("{}: the ranks' shapes differ: {}", kOp, per_rank(inputs, shape_of)));
    }
  }

  std::vector<std::int64_t> shape = in.shape();
  shape.insert(shape.begin(), comm.size());
  Buffer out = Buffer::allocate(shape, in.dtype());
  if (out.count() == 0) return out;
  if (comm.size() == 1) {
    std::memcpy(out.data(), in.data(), in.nbytes());
    return out;
  }
  comm.allgather(host_flat(in), out.flat());
  return out;
}

Buffer pad_across(Communicator& comm, const Buffer& in, int dim, double fill, bool pad_first) {
  constexpr std::string_view kOp = "pad_across";
  const std::vector<RankInput> inputs = exchange_inputs(comm, kOp, in, {dim, 0});
  for (const RankInput& input : inputs) {
    if (input.args[0] != dim) {
      throw Error(ErrorCode::InvalidArgument,
                  fmt::format("{}: the ranks passed different dims: {}", kOp,
                              per_rank(inputs, [](const RankInput& i) {
                                return fmt::format("dim {}", i.args[0]);
                              })));
    }
  }
  for (const RankInput& input : inputs) {
    if (input.shape.size() != in.shape().size()) {
      throw Error(ErrorCode::InvalidArgument,
                  fmt::format("{}: the ranks' buffers differ in number of dimensions: {}", kOp,
                              per_rank(inputs, shape_of)));
    }
  }

  // Python's rule: a negative dim counts from the end; out of range leaves the buffer alone.
  const int ndim = in.ndim();
  const int d = dim < 0 ? dim + ndim : dim;
  if (d < 0 || d >= ndim) return in;
  const auto at = static_cast<std::size_t>(d);
  std::int64_t largest = 0;
  for (const RankInput& input : inputs) largest = std::max(largest, input.shape[at]);
  if (in.shape()[at] == largest) return in;
  return in.pad(d, largest, fill, pad_first);
}

Buffer gather_for_metrics(Communicator& comm, const Buffer& in,
                          const GatherForMetricsOptions& options) {
  constexpr std::string_view kOp = "gather_for_metrics";
  std::optional<Error> bad_remainder;
  if (options.remainder < -1) {
    bad_remainder = Error(ErrorCode::InvalidArgument,
                          fmt::format("{}: remainder {} is invalid; pass -1 (unknown), 0 (nothing "
                                      "to drop) or the count of real samples in the last round",
                                      kOp, options.remainder));
  }
  const std::vector<RankInput> inputs = exchange_inputs(
      comm, kOp, in, {options.last_batch ? 1 : 0, options.remainder}, bad_remainder);
  for (const RankInput& input : inputs) {
    if (input.args != inputs[0].args) {
      throw Error(ErrorCode::InvalidArgument,
                  fmt::format("{}: the ranks disagree on last_batch or remainder: {}", kOp,
                              per_rank(inputs, [](const RankInput& i) {
                                return fmt::format("(last_batch {}, remainder {})", i.args[0] != 0,
                                                   i.args[1]);
                              })));
    }
  }

  Buffer gathered = gather_exchanged(comm, kOp, in, inputs);
  if (!options.last_batch || options.remainder <= 0) return gathered;
  const std::int64_t rows = gathered.shape()[0];
  if (options.remainder > rows) {
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("{}: remainder {} exceeds the {} rows gathered on the last batch; it "
                            "must come from the same n, batch and world as the batches",
                            kOp, options.remainder, rows));
  }
  // The first `remainder` rows are the real samples: each rank's last batch is the next slice
  // of the round in rank order, and the repeats that even out the round come after the data.
  return gathered.slice(0, options.remainder);
}

}  // namespace cohort::train
