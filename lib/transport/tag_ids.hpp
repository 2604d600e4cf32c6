#pragma once

// Tag ids: the communicator field of a message tag (tag.hpp), 11 bits. Communicators that share
// one set of connections (a world and everything split from it share one UCX worker) must not
// share a tag id, or one's messages would match the other's receives. Communicator ids are
// job-wide counters and cannot serve: they outgrow 11 bits, and two communicators whose ids
// agree modulo 2048 would collide. Tag ids are instead allocated as MPI implementations allocate
// context ids: every process keeps a mask of the ids its live communicators use, a split
// exchanges the masks of the new group's members, and the group takes an id free on all of
// them. Groups of one split are disjoint, so they may take the same id: no process ever sees
// messages of a group it is not in.
//
// Reuse is delayed on purpose: the group takes the first id after the highest id any member
// allocated last (wrapping), so an id freed by a destroyed communicator is not handed out again
// until the other 2046 were. What its peers sent that nobody received (a failed op's messages)
// is taken out when it goes (UcxHub::forget_tag_id, both the rings' and UCX's queues); the delay
// covers a stray still in flight then.
//
// Concurrent splits on several threads of one process: only one of them (the "owner") offers
// its mask at a time; the others offer a full mask, so their group finds no free id and the
// whole split is retried (every member sees the same table, so all retry together). See split.cpp.

#include "transport/tag.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>

namespace cohort::transport {

inline constexpr std::uint32_t kTagIds = 1u << kCommBits;
/// Words of a tag-id mask (bit i of word i / 64 set: id i is in use).
inline constexpr std::size_t kTagMaskWords = kTagIds / 64;
using TagMask = std::array<std::uint64_t, kTagMaskWords>;

/// What one process offers to a tag-id exchange.
struct TagOffer {
  TagMask used{};          ///< every id when `busy`
  std::uint32_t last = 0;  ///< the id this process allocated most recently
  bool busy = false;       ///< another thread of this process is allocating
};

class TagIdPool {
 public:
  /// Ids 0 (the world) and kTagIds - 1 (the connection handshake) are taken from the start.
  TagIdPool();

  /// Starts an allocation: this process's mask, or a full one with busy set while another
  /// allocation is in progress. Must be paired with finish(offer).
  TagOffer offer();
  /// Ends the allocation `offer` started; claims `id` for a new communicator when given (it must
  /// be free here: the group chose it from this process's mask).
  void finish(const TagOffer& offer, std::optional<std::uint32_t> id);
  /// Frees `id` (its communicator is gone).
  void release(std::uint32_t id) noexcept;

  /// The id a group whose members offered `offers` takes: the first id free in every mask after
  /// the highest `last` (wrapping), or nothing when none is free.
  static std::optional<std::uint32_t> choose(std::span<const TagOffer> offers);

 private:
  std::mutex mutex_;
  TagMask used_{};
  std::uint32_t last_ = 0;
  bool allocating_ = false;
};

namespace testing {
/// While set, every TagIdPool::offer() of this process answers busy (a full mask), as while
/// another thread of it allocates: splits then retry until a member's deadline.
void offer_busy(bool busy) noexcept;
/// While set, every TagIdPool::offer() of this process offers a full mask without being busy,
/// as when every id is held by live communicators: a split then fails for want of a tag id.
void offer_full(bool full) noexcept;
}  // namespace testing

/// A tag id held by a communicator; released when this goes.
class TagIdClaim {
 public:
  TagIdClaim() = default;
  TagIdClaim(std::shared_ptr<TagIdPool> pool, std::uint32_t id) noexcept
      : pool_(std::move(pool)), id_(id) {}
  ~TagIdClaim() {
    if (pool_) pool_->release(id_);
  }
  TagIdClaim(TagIdClaim&& other) noexcept : pool_(std::move(other.pool_)), id_(other.id_) {}
  TagIdClaim& operator=(TagIdClaim&&) = delete;
  TagIdClaim(const TagIdClaim&) = delete;
  TagIdClaim& operator=(const TagIdClaim&) = delete;

  std::uint32_t id() const noexcept { return id_; }
  /// This claim owns its id (it releases it). The world's claim and the views that share their
  /// communicator's id (host groups) hold none.
  bool held() const noexcept { return pool_ != nullptr; }

 private:
  std::shared_ptr<TagIdPool> pool_;
  std::uint32_t id_ = 0;
};

}  // namespace cohort::transport
