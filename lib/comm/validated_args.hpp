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
/// the path uses (algorithms/args.hpp). A null counts span means the uniform form. (A pointer,
/// not a std::optional by value: the optional's flag byte, stored and then read back as part of
/// an 8-byte word to copy it onto the stack, stalled the call until every earlier store had
/// left the store buffer, the last op's stores into shared memory included. Half the non-root's
/// samples of a 2-rank 8 B gather sat there; the drain now waits at the op's next locked
/// instruction instead, and the op got 0-8% faster.)
algorithms::AllreduceArgs allreduce_args(const Group& g, const Buffer& in, const Buffer& out,
                                         ReduceOp op);
algorithms::BroadcastArgs broadcast_args(const Group& g, const Buffer& in, const Buffer& out,
                                         int root);
algorithms::ReduceArgs reduce_args(const Group& g, const Buffer& in, const Buffer& out, ReduceOp op,
                                   int root);
algorithms::AllgatherArgs allgather_args(const Group& g, const Buffer& in, const Buffer& out,
                                         const std::span<const std::size_t>* counts);
algorithms::GatherArgs gather_args(const Group& g, const Buffer& in, const Buffer& out,
                                   const std::span<const std::size_t>* counts, int root);
algorithms::ScatterArgs scatter_args(const Group& g, const Buffer& in, const Buffer& out,
                                     const std::span<const std::size_t>* counts, int root);
algorithms::ReduceScatterArgs reduce_scatter_args(const Group& g, const Buffer& in,
                                                  const Buffer& out, ReduceOp op);
algorithms::AlltoallArgs alltoall_args(const Group& g, const Buffer& in, const Buffer& out,
                                       const std::span<const std::size_t>* send_counts,
                                       const std::span<const std::size_t>* recv_counts);

}  // namespace cohort::comm
