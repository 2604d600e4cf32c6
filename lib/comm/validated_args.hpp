#pragma once

// Validation of the public collectives' arguments, on the caller's thread, into the Args of
// algorithms/args.hpp.

#include <cohort/algorithm.hpp>
#include <cohort/buffer.hpp>

#include "algorithms/args.hpp"
#include "comm/validation.hpp"

#include <optional>
#include <span>

namespace cohort::comm {

/// This rank's place in the communicator.
struct Group {
  int rank;
  int size;
};

/// Each validates a public call's arguments (throwing Error(InvalidArgument) naming the op and
/// what was wrong, before any byte moves) and returns them as the one representation the rest of
/// the path uses (algorithms/args.hpp). A missing counts span means the uniform form.
algorithms::AllreduceArgs allreduce_args(const Group& g, const Buffer& in, const Buffer& out,
                                         ReduceOp op);
algorithms::BroadcastArgs broadcast_args(const Group& g, const Buffer& in, const Buffer& out,
                                         int root);
algorithms::ReduceArgs reduce_args(const Group& g, const Buffer& in, const Buffer& out, ReduceOp op,
                                   int root);
algorithms::AllgatherArgs allgather_args(const Group& g, const Buffer& in, const Buffer& out,
                                         std::optional<std::span<const std::size_t>> counts);
algorithms::GatherArgs gather_args(const Group& g, const Buffer& in, const Buffer& out,
                                   std::optional<std::span<const std::size_t>> counts, int root);
algorithms::ScatterArgs scatter_args(const Group& g, const Buffer& in, const Buffer& out,
                                     std::optional<std::span<const std::size_t>> counts, int root);
algorithms::ReduceScatterArgs reduce_scatter_args(const Group& g, const Buffer& in,
                                                  const Buffer& out, ReduceOp op);
algorithms::AlltoallArgs alltoall_args(const Group& g, const Buffer& in, const Buffer& out,
                                       std::optional<std::span<const std::size_t>> send_counts,
                                       std::optional<std::span<const std::size_t>> recv_counts);

}  // namespace cohort::comm
