#include "comm/id_blocks.hpp"

#include <cohort/error.hpp>

#include <fmt/format.h>

#include <algorithm>

namespace cohort::comm {
namespace {

/// Ids taken from the store at a time: a mesh's worth of splits for one round trip.
constexpr std::uint64_t kBlock = 256;

}  // namespace

std::uint32_t IdBlocks::reserve(Store& store, std::uint32_t n) {
  std::lock_guard lock(mutex_);
  if (end_ - next_ < n) {
    const std::uint64_t take = std::max<std::uint64_t>(kBlock, n);
    // add() returns the counter after adding: our block is (after - take, after].
    const std::int64_t after = store.add("cohort/comm/next_id", static_cast<std::int64_t>(take));
    if (after < static_cast<std::int64_t>(take) || after > static_cast<std::int64_t>(UINT32_MAX))
      throw Error(ErrorCode::Internal,
                  fmt::format("communicator id counter returned {} after adding {}: the job's "
                              "communicator ids would leave [1, 2^32)",
                              after, take));
    next_ = static_cast<std::uint64_t>(after) - take + 1;
    end_ = static_cast<std::uint64_t>(after) + 1;
  }
  const auto first = static_cast<std::uint32_t>(next_);
  next_ += n;
  return first;
}

}  // namespace cohort::comm
