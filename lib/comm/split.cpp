// split() and dup(): new communicators carved out of an existing one. Every member learns the
// group from an allgather of (color, key, node) over the parent, the group's first member takes
// a job-wide unique id from the store and publishes it, and the group wires its own transport.

#include <cohort/communicator.hpp>
#include <cohort/error.hpp>

#include "comm/communicator_impl.hpp"
#include "core/check.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <string>

namespace cohort {
namespace {

struct Member {
  std::int64_t key;
  int old_rank;
  std::int64_t node;
};

std::uint32_t parse_id(const Bytes& bytes, const std::string& key) {
  const std::string text(bytes.begin(), bytes.end());
  try {
    std::size_t used = 0;
    const unsigned long long value = std::stoull(text, &used);
    if (used == text.size() && value <= UINT32_MAX) return static_cast<std::uint32_t>(value);
  } catch (const std::exception&) {
  }
  throw Error(ErrorCode::Internal,
              fmt::format("store key '{}' holds '{}', not a communicator id", key, text));
}

}  // namespace

namespace comm {

std::uint32_t allocate_communicator_id(Store& store) {
  const std::int64_t id = store.add("cohort/comm/next_id", 1);
  if (id <= 0 || id > static_cast<std::int64_t>(UINT32_MAX)) {
    throw Error(ErrorCode::Internal,
                fmt::format("communicator id counter returned {}, outside [1, 2^32)", id));
  }
  return static_cast<std::uint32_t>(id);
}

std::uint32_t agree_on_id(Store& store, const std::string& key, bool leader,
                          std::chrono::milliseconds timeout) {
  if (leader) {
    const std::uint32_t id = allocate_communicator_id(store);
    store.set_string(key, std::to_string(id));
    return id;
  }
  return parse_id(store.get(key, timeout), key);
}

}  // namespace comm

std::shared_ptr<Communicator> Communicator::split(int color, int key) {
  if (color < 0 && color != kNoColor) {
    throw Error(
        ErrorCode::InvalidArgument,
        fmt::format("split: color {} is negative (pass Communicator::kNoColor to opt out)", color));
  }
  Impl& impl = *impl_;
  const std::uint32_t child = impl.children++;

  // Everyone learns everyone's (color, key, node) through the parent, in its op order.
  const std::array<std::int64_t, 3> mine{color, key, impl.node_rank};
  Buffer table = Buffer::allocate(3 * static_cast<std::size_t>(impl.size), DType::Int64);
  allgather(Buffer::view(mine.data(), mine.size(), DType::Int64), table);
  if (color == kNoColor) return nullptr;

  const auto* rows = table.data_as<const std::int64_t>();
  std::vector<Member> members;
  for (int r = 0; r < impl.size; ++r) {
    if (rows[3 * r] == color) members.push_back({rows[3 * r + 1], r, rows[3 * r + 2]});
  }
  std::sort(members.begin(), members.end(), [](const Member& a, const Member& b) {
    return a.key != b.key ? a.key < b.key : a.old_rank < b.old_rank;
  });
  const auto me = std::find_if(members.begin(), members.end(),
                               [&](const Member& m) { return m.old_rank == impl.rank; });
  COHORT_CHECK(me != members.end());
  const int new_rank = static_cast<int>(me - members.begin());
  const int new_size = static_cast<int>(members.size());
  const int local_size = static_cast<int>(std::count_if(
      members.begin(), members.end(), [&](const Member& m) { return m.node == impl.node_rank; }));

  const std::string id_key = fmt::format("cohort/comm/{}/child/{}/color/{}", impl.id, child, color);
  const std::uint32_t id =
      comm::agree_on_id(*impl.store, id_key, new_rank == 0, impl.default_timeout);
  return comm::make_communicator(comm::wire_communicator(impl.store, id, new_rank, new_size,
                                                         impl.node_rank, local_size,
                                                         impl.default_timeout, impl.debug_detail));
}

std::shared_ptr<Communicator> Communicator::dup() {
  return split(0, impl_->rank);
}

}  // namespace cohort
