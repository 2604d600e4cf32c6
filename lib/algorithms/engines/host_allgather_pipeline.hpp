#pragma once

// The hierarchical allgather (allgather/hierarchical.cpp) in chunks, where each host's ranks are
// consecutive, so that a host's ranks' blocks (its share) are one run of the output.
//
// The leaders exchange the hosts' shares a chunk at a time: chunk c is elements [c * k, (c + 1) *
// k) of every host's share (none of a share that ended), k the hierarchical chunk
// (host_signals.hpp). Every host's leader runs the same chunks' exchanges, whichever schedule
// its host runs.
//
// On a host with two or more ranks whose arena has single copy, the chunks are pipelined
// (allgather_through_helpers):
//   leader, per chunk c: copies the parts of its host's share chunk c that its other ranks
//     (helpers) hold out of their buffers (single copy), exchanges chunk c with the other
//     leaders straight into its output, and sends done(c) to each helper;
//   helper: first copies the host's other ranks' blocks out of their owners' buffers; then, per
//     chunk c, waits for done(c) and copies the other hosts' parts of chunk c out of the leader's
//     output, while the leader moves chunk c + 1.
// So the host's copies hide under the link's time, where the phases one after the other (gather
// into the leader, exchange, broadcast from the leader) add theirs to it (2 hosts x 2 ranks took
// 1.2-1.4x the time of 2 x 1 at 16-64 MiB on a 4 Gbit/s link; bench/PERFORMANCE-LOG.md,
// "Hierarchical allgather and reduce_scatter, pipelined").
//
// What is read and written where: every rank exposes its own block (in its output, where the
// normalisation put it), the leader its whole output too. Nobody writes another rank's memory.
// A rank's own block is never written during the op; the leader writes its output's other hosts'
// parts of chunk c only before done(c), and helpers read them only after it. A rank whose part
// fails marks its arena flags (the SingleCopyOp does), which every copy and the release check; a
// leader also sends its helpers "abandoned" in place of the next done(c), so they fail at once. A
// leader waits for nothing from its helpers but their release; it checks their flags before
// each chunk, so a helper's failure stops it within a chunk.

#include "algorithms/args.hpp"
#include "algorithms/host_groups.hpp"
#include "algorithms/op_context.hpp"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace cohort::algorithms {

/// Each host's share of an allgather's output, and how the leaders' exchange cuts the shares.
struct HostShares {
  std::vector<std::size_t> starts;  ///< host h's share begins at element starts[h] of the output
  std::vector<std::size_t> sizes;   ///< and is sizes[h] elements long
  std::size_t chunk_elems = 0;      ///< k: elements of a share per chunk
  std::size_t chunks = 0;           ///< enough for the largest share

  /// Elements [offset, offset + count) of the output are host h's part of chunk c (count 0 once
  /// its share ended).
  struct Part {
    std::size_t offset;
    std::size_t count;
  };
  Part part(std::size_t h, std::size_t c) const;
};

/// Whether every host's ranks are consecutive (a host's blocks then are one run of an output
/// laid out in rank order): the same answer on every rank.
bool hosts_consecutive(const HostGroups& groups);

/// The shares of `args` (packed in rank order, hosts consecutive), cut into chunks of
/// `chunk_elems`.
HostShares host_shares(const HostGroups& groups, const AllgatherArgs& args,
                       std::size_t chunk_elems);

/// On a leader: chunk c of every host's share reaches `out` of every leader (this host's part
/// already there), by a ring among the leaders (the parts lie apart in the output, where the
/// public allgatherv's blocks, which the table's algorithms expect, never do).
void exchange_share_chunk(const OpContext& leaders, const HostShares& shares, std::byte* out,
                          DType dtype, std::size_t c);

/// Runs the pipelined schedule above on every rank of a host with two or more ranks whose arena
/// has single copy. Every rank of the host calls it with the same arguments; the other hosts'
/// leaders run the same chunks' exchanges.
void allgather_through_helpers(const OpContext& ctx, HostGroups& groups, const AllgatherArgs& args,
                               const HostShares& shares);

namespace testing {
/// Allgathers this process ran on the pipelined schedule (as leader or helper).
std::uint64_t helped_allgathers() noexcept;
}  // namespace testing

}  // namespace cohort::algorithms
