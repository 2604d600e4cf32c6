#pragma once

// The pipelined schedule of the hierarchical allreduce, reduce and reduce_scatter
// (<family>/hierarchical.cpp) on a host with two or more ranks: the host's leader only moves data
// between hosts, and the host's other ranks, its helpers, do all of the host's memory work, a
// chunk ahead of the leader and a chunk behind it. Described below for the allreduce; the
// reduce_scatter's differs in what a chunk is and where its result goes (its function's
// contract). (The allgather's, which folds nothing, is host_allgather_pipeline.hpp.)
//
// Why: run one after the other, the reduce into the leader and the broadcast back add their time
// to the link's (2 hosts x 2 ranks took 1.1-1.2x the time of 2 hosts x 1 rank at 4-256 MiB on a
// 4 Gbit/s link, bench/PERFORMANCE-LOG.md, "Hierarchical allreduce, pipelined"). Cut into chunks,
// the helpers fold chunk c + 1 and copy chunk c - 1's result out while the leaders move chunk c,
// so all but the first fold and the last copy hide under the link's time; and the leader, whose
// core also runs the host's share of the network stack, copies nothing (in the reduce_scatter,
// only its own block's part of each chunk).
//
// Per chunk c of `chunks` (staging slot c % kStagingSlots of the leader's):
//   helper: once c >= kStagingSlots, waits for done(c - kStagingSlots) and copies that chunk's
//     result out of the leader's output; folds its slice of chunk c (every local rank's input,
//     in rank order, read by single copy) into the slot, which it maps; sends ready(c).
//   leader: waits for ready(c) from every helper; allreduces the slot among the leaders into its
//     output's chunk c; sends done(c).
// Then every rank releases the op (SingleCopyOp::release_after_all): a rank returns only once
// nobody reads its buffers any more. A rank whose part fails marks its arena flags (the
// SingleCopyOp does, and every copy and wait checks them) and sends its leader, or a leader its
// helpers, "abandoned" in place of the next signal, so the host's ranks fail at once rather than
// at their deadline (the other hosts' leaders meet theirs, or the failure itself). Ready and done
// are small messages in the host's group (not arena flags, which every local rank would have to
// step through together); done(c) also tells a helper that the leader is done with slot c %
// kStagingSlots.
//
// What may be written where: a helper writes only the leader's staging, which is mappable memory
// (core/mappable_memory.hpp), so a helper still writing after its leader failed reaches pages
// the leader no longer uses, never its heap; every other access is a read whose copy is checked
// against its owner's failure flag (SingleCopyOp::read_part). Each rank's buffers are read only
// where their owner does not write them at the time: the leader writes chunk c of its output
// (its input too, in place) only after every helper's ready(c), that is after their last read of
// chunk c of every input, and a helper writes its output's chunk c (its input too, in place) only
// after done(c), after which nobody reads chunk c of any input.

#include "algorithms/args.hpp"
#include "algorithms/host_groups.hpp"
#include "algorithms/op_context.hpp"

#include <cstddef>
#include <cstdint>

namespace cohort::algorithms {

/// How many chunks a helper may fold ahead of the leader's network: the leader's staging holds
/// this many chunks.
inline constexpr std::size_t kStagingSlots = 2;

/// Runs the schedule above on every rank of a host whose group has two or more ranks and whose
/// arena has single copy, for `args` cut into chunks of `chunk_elems` elements (the last may be
/// shorter), and returns true; or returns false on every rank of the host, having moved nothing,
/// when the leader could not get mappable staging memory (the caller then runs the phases one
/// after the other). Every rank of the host must call it with the same arguments and chunk; the
/// leaders of the other hosts must run the same chunks' allreduces (whichever schedule their own
/// host runs).
bool allreduce_through_helpers(const OpContext& ctx, HostGroups& groups, const AllreduceArgs& args,
                               std::size_t chunk_elems);

/// The same schedule for a reduce_scatter whose hosts all have the same number of ranks, each
/// host's consecutive (a host's ranks' blocks, its share, are then one run of every input), and
/// whose shares are cut into chunks of `chunk_elems`: chunk c is the same elements of every
/// host's share. The helpers fold chunk c of every share (every local rank's input) into the
/// leader's staging, the leaders reduce_scatter it so that each gets its own host's share's chunk
/// c, reduced, into a buffer the helpers then copy their blocks' parts out of (the leader copies
/// its own). The staging holds kStagingSlots chunks of every host's share: 2 MiB per host, at most
/// twice the input (which holds every host's share of more than a chunk). The same contract as the
/// allreduce's otherwise; the other hosts' leaders must run the same chunks' reduce_scatters.
bool reduce_scatter_through_helpers(const OpContext& ctx, HostGroups& groups,
                                    const ReduceScatterArgs& args, std::size_t chunk_elems);

/// The same schedule for a reduce to `args.root`: every host's ranks fold as for the allreduce,
/// the leaders reduce each chunk to the root's host's leader, into the root's output when the
/// root leads its host, else into a buffer of the leader's that the root (a helper) copies each
/// chunk out of. The same contract as the allreduce's otherwise; the other hosts' leaders must
/// run the same chunks' reduces.
bool reduce_through_helpers(const OpContext& ctx, HostGroups& groups, const ReduceArgs& args,
                            std::size_t chunk_elems);

namespace testing {
/// Reduces this process ran on the pipelined schedule (as leader or helper).
std::uint64_t helped_reduces() noexcept;
/// Allreduces and reduce_scatters this process ran on the pipelined schedule (as leader or
/// helper), for tests that must know it was taken.
std::uint64_t helped_allreduces() noexcept;
std::uint64_t helped_reduce_scatters() noexcept;
}  // namespace testing

}  // namespace cohort::algorithms
