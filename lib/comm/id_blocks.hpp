#pragma once

// Communicator ids (Communicator::id(): unique within the job) handed out in blocks, so a split
// costs no store round trip in the common case: the store's counter "cohort/comm/next_id" is
// advanced by a block at a time, and the ids of a block are used by this process alone (as the
// first rank of the parent of each split it leads). Shared by a world and the communicators split
// from it; thread-safe.

#include <cohort/store.hpp>

#include <cstdint>
#include <mutex>

namespace cohort::comm {

class IdBlocks {
 public:
  /// `n` consecutive ids never handed out before in this job: [result, result + n). Advances the
  /// store's counter (by at least `n`, usually by a larger block) when this process's block runs
  /// short. Throws Error(Internal) when the ids would pass 2^32 - 1.
  std::uint32_t reserve(Store& store, std::uint32_t n);

 private:
  std::mutex mutex_;
  std::uint64_t next_ = 0;  // first unused id of the current block
  std::uint64_t end_ = 0;   // one past its last
};

}  // namespace cohort::comm
