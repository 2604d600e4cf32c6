#pragma once

// The first step of every gathering helper in metrics.hpp: each rank learns every rank's dtype,
// shape and the call's arguments that must agree, before any data moves, so that a mismatch is
// decided from the same exchanged facts (and thrown) on every rank instead of corrupting data or
// leaving a rank waiting in a collective its peers never join.

#include <cohort/buffer.hpp>
#include <cohort/communicator.hpp>
#include <cohort/dtype.hpp>
#include <cohort/error.hpp>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cohort::train {

/// What one rank brought to a gathering call, as every rank learns it.
struct RankInput {
  DType dtype = DType::Float32;
  std::vector<std::int64_t> shape;
  /// The call's own arguments that the ranks must agree on (e.g. pad_across's dim); the caller
  /// compares them.
  std::array<std::int64_t, 2> args{};
};

/// Collective over `comm`: every rank's dtype, shape and `args`, in rank order.
///
/// This rank's own problems are found first: device memory (Unsupported), a non-contiguous
/// buffer (InvalidArgument), then `local_error` when the caller found one in its arguments. A
/// rank with a problem still takes part in the first exchange, then throws its own error; every
/// other rank throws the ErrorCode of the lowest failing rank with a message naming each failing
/// rank and what was wrong. `op` prefixes the messages.
///
/// Cost: an allgather of 5 int64 per rank, then an allgatherv of the dimensions (skipped when
/// every input is 0-d, or when a rank reported a problem). A world of one communicates nothing.
std::vector<RankInput> exchange_inputs(Communicator& comm, std::string_view op, const Buffer& in,
                                       std::array<std::int64_t, 2> args = {},
                                       const std::optional<Error>& local_error = std::nullopt);

/// "[3, 2]"; "[]" for a 0-d shape.
std::string shape_string(const std::vector<std::int64_t>& shape);

}  // namespace cohort::train
