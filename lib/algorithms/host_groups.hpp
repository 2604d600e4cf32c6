#pragma once

// HostGroups: a communicator's ranks grouped by host, for the hierarchical algorithms
// (allreduce/hierarchical.cpp). Worked out on the first op that asks, collectively like the
// shared arena: every rank learns every rank's host identity (hostname, boot id, pid namespace,
// as the shared arena compares them), the ranks of each host form a local group (ordered by
// rank) with a shared arena of its own, and the first rank of each host is that host's leader.
// The groups are views over the communicator's transport (no new connection, no new tag id:
// they run inside the op that uses them, with its tags).
//
// Usable only when the ranks span at least two hosts, some host has two or more ranks, and every
// host with two or more ranks got its arena; every rank reaches the same verdict (rank 0 decides
// from what everyone reported). Only the thread driving the communicator calls get().

#include <cohort/dtype.hpp>

#include "algorithms/op_context.hpp"
#include "transport/lazy_arena.hpp"
#include "transport/transport.hpp"

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace cohort::algorithms {

class HostGroups {
 public:
  /// `eligible` false: get() answers null without communicating (one host, or too few ranks).
  HostGroups(int host_ranks, bool eligible) noexcept
      : host_ranks_(host_ranks), decided_(!eligible) {}

  /// The groups (set up on the first call, collectively over ctx.transport, with the op's set-up
  /// tags), or null when the layout does not call for them.
  HostGroups* get(const OpContext& ctx);

  /// The context of this rank's local group for the op `ctx` (its arena set up already).
  OpContext local(const OpContext& ctx) const;
  /// The context of the leaders' group; only on leaders.
  OpContext leaders(const OpContext& ctx) const;
  bool is_leader() const noexcept { return local_rank_ == 0; }
  /// Which host (index in the leaders' group) a rank of the communicator is on, and its index
  /// in that host's group.
  int host_of(int rank) const { return host_of_rank_.at(static_cast<std::size_t>(rank)); }
  int local_index_of(int rank) const {
    return local_index_of_rank_.at(static_cast<std::size_t>(rank));
  }
  /// The ranks of the communicator on host `host`, in rank order (the first is its leader).
  const std::vector<int>& members(int host) const {
    return members_.at(static_cast<std::size_t>(host));
  }
  /// The most ranks any host has.
  int largest_host() const noexcept { return largest_host_; }
  int host_index() const noexcept { return host_index_; }
  int hosts() const noexcept { return hosts_; }
  int local_size() const noexcept { return local_size_; }
  /// Scratch for the sub-ops' normalisation (the op's own pool stays the outer op's).
  ScratchPool& staging() noexcept { return staging_; }
  /// Buffers a hierarchical algorithm keeps across its phases (the phases' own algorithms use
  /// the op's scratch, and their normalisation staging(), so neither may hold them).
  ScratchPool& buffers() noexcept { return buffers_; }
  /// At least `bytes` of mappable memory (core/mappable_memory.hpp), kept across ops and grown
  /// as needed, which the host's other ranks map and write (the pipelined allreduce's staging,
  /// engines/host_pipeline.hpp). Null when the kernel refuses it. Contents unspecified.
  std::byte* mappable_staging(std::size_t bytes) noexcept;

  /// Communicator::abort(): waits in the groups' views and arena (now or later) throw.
  void interrupt(const std::string& reason) noexcept;
  /// The groups' scratch, their mappable staging included, moved into one object (the
  /// communicator is going: see Communicator::Impl::ScratchRetirement). No op runs after this.
  std::shared_ptr<void> take_scratch();
  /// The communicator failed: cancels the requests left in the groups' views (a hierarchical
  /// op's receives post into its output), as Transport::cancel_all. By the thread that drives
  /// the communicator's ops.
  void cancel_all() noexcept;
  /// Who serves between the rounds of the groups' waits (transport/side_work.hpp), on the views
  /// and arena made later too. Set before the first op; cleared before `side_work` goes.
  void set_side_work(transport::SideWork* side_work) noexcept;

  /// Steps of the op's tag space the set-up uses: below the communicator arena's.
  static constexpr std::uint32_t kFirstSetupStep =
      OpContext::kArenaSetupStep - 2 - transport::SharedArena::kSetupSteps;

 private:
  void set_up(const OpContext& ctx);

  int host_ranks_;
  bool decided_;
  bool usable_ = false;
  int hosts_ = 0;
  int host_index_ = 0;
  int local_rank_ = 0;
  int local_size_ = 1;
  int largest_host_ = 1;
  std::vector<std::vector<int>> members_;
  std::vector<int> host_of_rank_;
  std::vector<int> local_index_of_rank_;
  /// mappable_staging()'s allocation (free_mappable on destruction), declared
  /// before the views so that it outlives their cancelling of requests that may point into it.
  struct MappableBlock {
    void* base = nullptr;
    std::size_t bytes = 0;
    MappableBlock() = default;
    MappableBlock(const MappableBlock&) = delete;
    MappableBlock& operator=(const MappableBlock&) = delete;
    ~MappableBlock();
  } mappable_;
  std::unique_ptr<transport::Transport> local_;
  std::unique_ptr<transport::Transport> leaders_;
  std::unique_ptr<transport::LazyArena> local_arenas_;
  ScratchPool staging_;
  ScratchPool buffers_;
  /// Guards the pointers above against interrupt() from another thread while set_up() makes
  /// them, and the reason once raised (views made later are interrupted at once).
  mutable std::mutex mutex_;
  std::optional<std::string> interrupted_;
  transport::SideWork* side_work_ = nullptr;  ///< guarded by mutex_ as the pointers are
};

/// What every hierarchical algorithm's accepts() asks: the groups of ctx's communicator when its
/// layout calls for them (HostGroups::get, collective on the first op that asks), null on fewer
/// than 3 ranks or without groups.
inline HostGroups* hierarchy_of(const OpContext& ctx) {
  return ctx.size >= 3 && ctx.host_groups != nullptr ? ctx.host_groups->get(ctx) : nullptr;
}

/// The last phase of the hierarchical algorithms: each leader's `out` (count elements) reaches
/// its host's other ranks' `out` through the host's arena.
void broadcast_from_leader(const OpContext& ctx, HostGroups& groups, void* out, std::size_t count,
                           DType dtype);

}  // namespace cohort::algorithms
