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

#include <cohort/store.hpp>

#include <chrono>
#include <memory>
#include <string>

namespace cohort::transport {

class LazyArena {
 public:
  /// `eligible` is false when the arena can never be used (one rank, or ranks on several
  /// hosts): get() then answers null without touching the store. `local_world_size` is how many
  /// ranks share this host (for the arena's busy-polling); the other arguments are create()'s.
  LazyArena(std::shared_ptr<Store> store, std::string key_prefix, int rank, int size,
            int local_world_size, bool eligible);

  /// The arena, creating it on the first call (store timeouts bounded by `deadline`); null when
  /// not eligible or when the ranks decided against one (every rank then gets null, now and
  /// later). Throws what SharedArena::create throws; a later call tries again.
  SharedArena* get(Deadline deadline);
  /// The arena if one was created, without creating it.
  SharedArena* existing() const noexcept { return arena_.get(); }

 private:
  std::shared_ptr<Store> store_;
  std::string key_prefix_;
  int rank_;
  int size_;
  int local_world_size_;
  bool tried_;
  std::unique_ptr<SharedArena> arena_;
};

}  // namespace cohort::transport
