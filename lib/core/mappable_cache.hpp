#pragma once

// Freed mappable allocations kept for reuse (core/mappable_memory.hpp): which one serves a new
// allocation, and which leave when the cache is full. Policy only: the caller holds the lock
// and releases (punches, unmaps, closes) what this hands back, outside it.
//
// Why keep them: a fresh allocation's pages fault in one by one on first touch, and shared
// memory gets no huge pages by default (shmem_enabled "never"), so every 4 KiB page faults.
// On a paravirtualised guest a first touch costs microseconds even with the page already in
// the file (measured 2026-11-30: 64 MiB allocated and written once took 203 ms, a second
// write 3.3 ms; an allreduce of it about 3-6 ms). A program that allocates a mappable buffer
// per step would pay that every step; PyTorch's caching allocators exist for the same reason.
// A kept allocation keeps its pages and its file, so peers' cached mappings of it stay valid
// (transport/peer_mappings.hpp) and their page tables too.

#include <sys/types.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>

namespace cohort {

/// One freed allocation as the cache holds it: still mapped here, its descriptor still open.
struct CachedMappable {
  void* base = nullptr;
  std::size_t bytes = 0;  ///< the whole allocation (the file's length)
  int fd = -1;
  std::uint64_t inode = 0;
  std::uint64_t device = 0;
  pid_t owner = 0;  ///< the process that allocated it; a forked child must not reuse it
};

class MappableCache {
 public:
  /// At most this many allocations are kept, whatever their size (each holds a descriptor).
  static constexpr std::size_t kMaxBlocks = 32;

  /// Blocks handed back for release by one call: at most every kept block and the one offered.
  struct Released {
    std::array<CachedMappable, kMaxBlocks + 1> blocks{};
    std::size_t count = 0;
    void add(const CachedMappable& block) noexcept { blocks[count++] = block; }
  };

  /// Takes the smallest kept block of `owner` with at least `bytes` and at most a quarter more
  /// (a larger one would hold memory the caller does not use), or nothing. Blocks of another
  /// owner, inherited across a fork, are moved into `foreign`: only their owner may reuse them.
  std::optional<CachedMappable> take(std::size_t bytes, pid_t owner, Released& foreign) noexcept;

  /// Keeps `block` while the kept bytes stay within `limit_bytes` and the blocks within
  /// kMaxBlocks, releasing the longest-kept blocks first to make room; `block` itself goes into
  /// `released` when it alone exceeds the limit.
  void keep(const CachedMappable& block, std::size_t limit_bytes, Released& released) noexcept;

  /// Every kept block into `released`.
  void drain(Released& released) noexcept;

  std::size_t bytes() const noexcept { return bytes_; }
  std::size_t size() const noexcept { return count_; }

 private:
  struct Entry {
    CachedMappable block;
    std::uint64_t order = 0;  ///< when it was kept: the smallest leaves first
  };
  void remove(std::size_t i) noexcept;

  std::array<Entry, kMaxBlocks> entries_{};
  std::size_t count_ = 0;
  std::size_t bytes_ = 0;
  std::uint64_t next_order_ = 0;
};

}  // namespace cohort
