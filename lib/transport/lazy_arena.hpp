#pragma once

// A communicator's shared arena, set up by the first collective that asks for one rather than
// when the communicator is created: a process mesh creates many communicators, and most of them
// (or all, across hosts) never run a shared-memory algorithm.
//
// The first get() is collective, like SharedArena::create: every rank of the communicator makes
// it in the same op, because ops run in the same order everywhere and whether an algorithm asks
// for the arena depends only on arguments that agree across ranks. Only the thread driving the
// communicator calls get() (its executor serialises ops).

#include "transport/shared_arena.hpp"
#include "transport/transport.hpp"

#include <memory>
#include <string>

namespace cohort::transport {

class LazyArena {
 public:
  /// `eligible` is false when the arena can never be used (one rank, or ranks on several
  /// hosts): get() then answers null without communicating. `local_world_size` is how many
  /// ranks share this host (for the arena's busy-polling).
  LazyArena(int local_world_size, bool eligible) noexcept
      : local_world_size_(local_world_size), tried_(!eligible) {}

  /// The arena, creating it on the first call through SharedArena::create over `transport`
  /// (the communicator's) with the op's tags from `first_tag`; null when not eligible or when
  /// the ranks decided against one (every rank then gets null, now and later). Throws what
  /// create() throws (the op then fails and poisons the communicator).
  SharedArena* get(Transport& transport, Tag first_tag, Deadline deadline,
                   const std::string& what) {
    if (tried_) return arena_.get();
    tried_ = true;
    arena_ = SharedArena::create(transport, first_tag, local_world_size_, deadline, what);
    if (arena_) arena_->set_interruption(&interruption_);
    return arena_.get();
  }
  /// Communicator::abort(): waits in the arena (now or later) throw. Any thread; never throws.
  /// (The arena itself is only touched by the driving thread; the flag is what is shared.)
  void interrupt(const std::string& reason) noexcept { interruption_.raise(reason); }
  /// Who serves between the rounds of the arena's waits (side_work.hpp); as
  /// Transport::set_side_work.
  void set_side_work(SideWork* side_work) noexcept { interruption_.set_side_work(side_work); }
  /// The arena if one was created, without creating it.
  SharedArena* existing() const noexcept { return arena_.get(); }

 private:
  int local_world_size_;
  bool tried_;
  std::unique_ptr<SharedArena> arena_;
  Interruption interruption_;
};

}  // namespace cohort::transport
