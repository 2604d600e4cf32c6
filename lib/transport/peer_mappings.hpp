#pragma once

// Where this process maps other ranks' mappable memory (core/mappable_memory.hpp), so that a
// collective reads and writes their buffers in place.
//
// A mapping is made the first time a rank's allocation is named and kept: mapping costs a
// system call and a page fault per page on first touch, which a loop over the same buffers
// should pay once. A cached mapping stays right because the inode it was checked against
// cannot be reused while this process holds the file; a freed allocation is either kept by its
// owner for reuse (the same file again, so the mapping serves the new buffer) or has had its
// pages punched out, so keeping its mapping costs address space, not memory. About
// kMaxMappings are kept, the least recently used unmapped first; but never one the current op
// mapped or used, whose addresses that op may still hold (an op over many ranks may need more).

#include "core/mappable_memory.hpp"

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace cohort::transport {

class PeerMappings {
 public:
  static constexpr std::size_t kMaxMappings = 64;

  PeerMappings() = default;
  ~PeerMappings();
  PeerMappings(const PeerMappings&) = delete;
  PeerMappings& operator=(const PeerMappings&) = delete;

  /// This process's address of the `bytes` at `ref` in rank r's (process `pid`'s) mappable
  /// memory, mapped read-write. The address stays valid as long as calls name the same `op` (an
  /// op's number, the same for all of its calls): only mappings last used by another op are
  /// unmapped to make room. The owner must keep the allocation alive and the descriptor in `ref`
  /// open while this runs (a collective's exposure guarantees both). Throws Error(SystemError)
  /// when the owner's descriptor cannot be opened or mapped (even after this process let go of
  /// its kept mappable allocations), and Error(RemoteError) when it names
  /// another file than `ref` says (the owner freed the allocation during the op) or one shorter
  /// than the block. Not thread-safe: one op at a time.
  std::byte* map(int r, pid_t pid, const MappableRef& ref, std::size_t bytes, std::uint64_t op,
                 const std::string& what);

  /// Mappings kept now (for tests).
  std::size_t size() const noexcept { return mappings_.size(); }

 private:
  struct Mapping {
    int rank;
    std::uint64_t inode;
    std::uint64_t device;
    std::byte* base;
    std::size_t bytes;
    std::uint64_t last_use;
    std::uint64_t op;  ///< the op that last used it
  };

  /// Opens and maps rank r's file after checking it is the one `ref` names. Out of descriptors
  /// or address space, it first lets go of this process's kept allocations (and, for the
  /// mapping, of every cached mapping `op` does not hold) and tries once more.
  Mapping open_mapping(int r, pid_t pid, const MappableRef& ref, std::uint64_t op,
                       const std::string& what);
  /// Unmaps the least recently used mapping not used by `op`; false when every one was.
  bool evict_one(std::uint64_t op) noexcept;

  std::vector<Mapping> mappings_;
  std::uint64_t uses_ = 0;
};

}  // namespace cohort::transport
