#pragma once

// What an algorithm gets to run one collective: the transport, who it is, the op's tag space,
// its deadline, and reusable scratch memory. Algorithms are free functions of
// (const OpContext&, const <Collective>Args&); see args.hpp and the selection table.

#include "transport/lazy_arena.hpp"
#include "transport/shared_arena.hpp"
#include "transport/transport.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace cohort::algorithms {

class HostGroups;
class SelectionMemo;

/// Grow-only, 64-byte-aligned scratch buffers owned by a communicator, so steady-state ops never
/// allocate. Slot i is independent of slot j (an algorithm may hold several at once).
class ScratchPool {
 public:
  /// At least `bytes` bytes for slot `slot`; contents are unspecified. Valid until the next
  /// get() of the same slot with a larger size.
  std::byte* get(std::size_t bytes, std::size_t slot = 0);

 private:
  struct Block {
    std::unique_ptr<std::byte[], void (*)(std::byte*)> data{nullptr, nullptr};
    std::size_t bytes = 0;
  };
  std::vector<Block> blocks_;
};

struct OpContext {
  transport::Transport& transport;
  int rank;
  int size;
  /// The communicator's tag id (tag_ids.hpp): its field in every message tag.
  std::uint32_t tag_id;
  std::uint32_t seq;  ///< the op's sequence number on this communicator
  transport::Deadline deadline;
  ScratchPool& scratch;
  /// "allreduce #17 (ring)", for error messages. A reference to storage the caller reuses op
  /// after op, so a small collective formats its name without allocating.
  const std::string& what;
  /// Where the communicator's shared segment comes from (null: never one).
  transport::LazyArena* arenas = nullptr;
  /// The communicator's ranks grouped by host, for hierarchical algorithms (null: never).
  HostGroups* host_groups = nullptr;
  /// The communicator's memory of its last algorithm choices (null: choose afresh every time).
  SelectionMemo* choices = nullptr;

  /// The communicator's shared segment when all its ranks share this host, else null. The first
  /// call on a communicator sets the segment up, collectively: an algorithm asks for it before
  /// deciding anything that could differ across ranks.
  transport::SharedArena* arena() const {
    return arenas ? arenas->get(transport, tag(kArenaSetupStep), deadline, what) : nullptr;
  }
  /// The steps the arena's set-up uses (the last of the step space: an op that sets the arena up
  /// finishes that before it sends anything else).
  static constexpr std::uint32_t kArenaSetupStep =
      (1u << transport::kStepBits) - transport::SharedArena::kSetupSteps;

  /// The tag of step `step` of this op (source bits added by the transport).
  transport::Tag tag(std::uint32_t step) const noexcept {
    return transport::op_tag(tag_id, seq, step);
  }
};

}  // namespace cohort::algorithms
