#pragma once

// Host memory that other processes of the host can map: each allocation is its own memfd,
// mapped shared, and registered here so that a collective can tell whether a pointer lies in
// one and name it to a peer.
//
// Why: ranks of one host otherwise reach each other's buffers only by copying, through the
// shared arena (two copies) or process_vm_readv (one copy, and the kernel pins every page
// first). A peer that maps the owner's memfd reads and writes the buffer in place: a large
// allreduce then touches memory as two threads of one process would (each element read once
// from every input and written once into every output), which no copy-based scheme can.
//
// A peer opens the owner's descriptor through /proc/<pid>/fd/<fd> (transport/peer_mappings.hpp)
// and checks the inode, so the owner keeps the descriptor open for the allocation's life. A
// freed allocation is kept, file, mapping and pages, for a later allocation of about its size
// (core/mappable_cache.hpp says why; COHORT_MAPPABLE_CACHE_MIB bounds it): peers' mappings of
// it stay right, since it is the same file. One that is not kept (over the bound, or live when
// an op failed: retire_live_mappable) has its pages punched out of the file before it is
// closed: a peer that still maps it (mappings are cached) keeps only address space, and one that
// touches it anyway (only a collective that failed on the owner's side can) reads zeros instead
// of faulting, its writes holding pages only until its mapping goes.
//
// The mapping is shared, so a forked child sees and writes the parent's memory rather than a
// copy; only the allocating process punches the pages out when freeing, and a fork holds the
// registry's lock across it. The parent never hands out again an allocation live at a fork (the
// child may still use its view of it), and a child never reuses one its parent kept.

#include <cstddef>
#include <cstdint>

namespace cohort {

/// How a peer finds a block of mappable memory: the owner's descriptor and the file's identity,
/// and where the block starts in the file.
struct MappableRef {
  std::int32_t fd = -1;          ///< the owner's descriptor of the memfd
  std::uint64_t inode = 0;       ///< the memfd's inode, which a peer checks after opening fd
  std::uint64_t device = 0;      ///< and its device
  std::uint64_t file_bytes = 0;  ///< the memfd's length (the whole allocation)
  std::uint64_t offset = 0;      ///< the block's first byte in the file
};

/// At least `bytes` of mappable memory whose first `bytes` read as zeros (rounded up to whole
/// pages, and to huge pages from kHugePageBytes on, where the kernel allows them for shared
/// memory; a kept allocation reused may be up to a quarter larger); its size in `*rounded`.
/// Null with errno set when the kernel refuses (no memfd, out of descriptors or memory).
/// Thread-safe. Release with free_mappable.
void* allocate_mappable(std::size_t bytes, std::size_t* rounded) noexcept;

/// Releases an allocation of allocate_mappable (its first byte): the allocating process keeps it
/// for reuse within COHORT_MAPPABLE_CACHE_MIB (the longest-kept leave first), unless it was live
/// at a retire_live_mappable(); what it does not keep it punches out of the file, unmaps and
/// closes (a forked child only drops its own view). Null is ignored. Thread-safe.
void free_mappable(void* base) noexcept;

/// Marks every allocation live now as not to be kept when freed. For an op that failed: peers
/// may still be writing the piece they were at into its buffers, which must not land in a
/// buffer handed out again (a fork calls it too: the child keeps views). Thread-safe.
void retire_live_mappable() noexcept;

/// Lets go of every kept allocation (as free_mappable does with one it does not keep); returns
/// the bytes they held. Thread-safe.
std::size_t release_cached_mappable() noexcept;

/// The bytes kept for reuse now. Thread-safe.
std::size_t cached_mappable_bytes() noexcept;

/// Whether [p, p + bytes) lies inside one live allocation of this process; fills `*ref` when it
/// does. Costs one relaxed load while the process has no allocation; a shared lock otherwise.
/// Thread-safe. The answer is only as durable as the allocation: the caller must keep it alive.
bool find_mappable(const void* p, std::size_t bytes, MappableRef* ref) noexcept;

}  // namespace cohort
