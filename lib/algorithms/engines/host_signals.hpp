#pragma once

// What the hierarchical algorithms' chunks need: how a vector is cut into chunks (allreduce,
// broadcast, reduce, allgather, reduce_scatter, <family>/hierarchical.cpp), and the small messages
// of the pipelined schedules (host_pipeline.hpp, host_allgather_pipeline.hpp) by which a host's
// leader and its other ranks (helpers) tell each other that a chunk is ready (helper to leader) or
// done (leader to helper), or that their part of the op failed.
//
// Signals carry the chunk's number and come in chunk order (the transport matches messages of
// one tag between two ranks in posting order); a rank whose part failed sends kAbandoned in place
// of its next signal, so its peers fail at once with RemoteError instead of at their deadline.

#include "algorithms/host_groups.hpp"
#include "algorithms/op_context.hpp"

#include <cohort/dtype.hpp>

#include <cstddef>
#include <cstdint>
#include <span>

namespace cohort::algorithms {

/// Elements per chunk of a hierarchical algorithm's vector: the same on every rank, so every
/// rank cuts the same chunks. 1 MiB, unless a test chose another size.
std::size_t hierarchical_chunk_elements(DType dtype);

/// Chunk c of a vector of `count` elements cut into `chunk_elems`: [offset, offset + count).
struct Chunk {
  std::size_t offset;
  std::size_t count;
};
inline Chunk chunk_at(std::size_t c, std::size_t chunk_elems, std::size_t count) {
  const std::size_t offset = c * chunk_elems;
  return {offset, chunk_elems < count - offset ? chunk_elems : count - offset};
}
inline std::size_t chunks_of(std::size_t count, std::size_t chunk_elems) {
  return (count + chunk_elems - 1) / chunk_elems;
}

/// The steps of the op's tag space the signals use: just below HostGroups' set-up, far from the
/// steps of the leaders' own collectives (whose messages come from other hosts' leaders anyway).
inline constexpr std::uint32_t kReadyStep = HostGroups::kFirstSetupStep - 1;
inline constexpr std::uint32_t kDoneStep = HostGroups::kFirstSetupStep - 2;
/// The hierarchical reduce's chunks from its host's leader to a root that does not lead it, where
/// the host does not run the pipelined schedule (reduce/hierarchical.cpp).
inline constexpr std::uint32_t kResultStep = HostGroups::kFirstSetupStep - 3;

/// Whether this rank's host runs the pipelined schedules: it has helpers, and its arena lets its
/// ranks read each other's memory. Every rank of a host reads the same arena's answer, so the
/// host agrees on the schedule.
bool host_pipelines(const OpContext& ctx, const HostGroups& groups);

/// Sends chunk number `chunk` to local rank `peer` and waits until it left (until `local`'s
/// deadline). On an error, cancels the view's requests before it leaves (the host group's view
/// serves one op at a time, so they are this op's).
void signal_chunk(const OpContext& local, int peer, std::uint32_t step, std::uint64_t chunk);

/// Waits for the signal of chunk `chunk` from each of `peers` (local ranks). Throws
/// Error(RemoteError) naming the peer's rank when it abandoned the op, Error(Internal) when it
/// signalled another chunk, and the transport's errors (its requests cancelled first).
void await_chunk(const OpContext& local, const HostGroups& groups, std::span<const int> peers,
                 std::uint32_t step, std::uint64_t chunk);

/// After this rank's part of the op failed: sends kAbandoned to the ranks that may be waiting
/// for its signals (a leader to every helper on kDoneStep, a helper to its leader on
/// kReadyStep), waiting at most a moment for each. Never throws.
void abandon_signals(const OpContext& local, bool leader) noexcept;

/// Calls the testing hook (testing::set_pipeline_chunk_hook), if any, with this rank's local
/// rank and chunk `c`.
void run_chunk_hook(const OpContext& local, std::size_t c);

namespace testing {
/// Cuts hierarchical allreduces, broadcasts, reduces, allgathers and reduce_scatters into chunks of
/// `bytes` (rounded down to whole elements, at least one) instead of 1 MiB, so tests reach many
/// chunks with small vectors; 0 restores the default. Every rank must set the same before the ops
/// it affects.
void set_hierarchical_chunk_bytes(std::size_t bytes) noexcept;
/// Called on the pipelined schedules with this rank's local rank and the chunk: by the leader
/// before its op among the leaders of each chunk; by a helper of an allreduce, reduce or
/// reduce_scatter before it folds each, of an allgather after done(c), before it copies chunk c.
/// Null (the default) for none. A test's hook may throw (a failure mid-op). Set it before the op.
void set_pipeline_chunk_hook(void (*hook)(int local_rank, std::size_t chunk)) noexcept;
}  // namespace testing

}  // namespace cohort::algorithms
