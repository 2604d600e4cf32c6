// split() and dup(): new communicators carved out of an existing one, sharing its connections.
// One allgather over the parent carries each rank's (color, key, node), its tag-id offer
// (tag_ids.hpp) and, from the parent's rank 0, the first of a block of job-wide ids it reserved.
// From that table every member computes the same groups, ids and tag ids; the new communicator
// derives its transport from the parent's. No store access, no new connection: a split costs
// about one allgather on the parent.

#include <cohort/communicator.hpp>
#include <cohort/error.hpp>

#include "comm/communicator_impl.hpp"
#include "core/check.hpp"
#include "transport/host_identity.hpp"
#include "transport/tag_ids.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

namespace cohort {
namespace {

// One row per parent rank in the split's exchange (int64 words).
constexpr std::size_t kColor = 0;
constexpr std::size_t kKey = 1;
constexpr std::size_t kNode = 2;       // host_key(): which host the rank is on
constexpr std::size_t kIdBase = 3;     // the first reserved id (parent rank 0's row only)
constexpr std::size_t kOutOfTime = 4;  // 1: this rank's deadline for retrying has passed
constexpr std::size_t kOffer = 5;      // busy, last, then the tag-id mask
constexpr std::size_t kOfferWords = 2 + transport::kTagMaskWords;
constexpr std::size_t kRowWords = kOffer + kOfferWords;
/// kIdBase on rank 0 when it could not reserve ids: this minus its error's code.
constexpr std::int64_t kReserveFailed = -2;

/// This process's host as kNode holds it: FNV-1a of its host identity (transport/
/// host_identity.hpp), which the arena compares too. Not the launcher's node index: that is
/// derived as rank / local size where the launcher gives none (Open MPI, PMI), which --map-by
/// node breaks, and then a split's one-host group would be denied its arena. A collision only
/// makes a group eligible for an arena, whose set-up compares identities itself.
std::int64_t host_key() {
  static const std::int64_t key = [] {
    std::uint64_t hash = 14695981039346656037ull;
    for (const unsigned char c : transport::local_host_identity()) {
      hash ^= c;
      hash *= 1099511628211ull;
    }
    return static_cast<std::int64_t>(hash);
  }();
  return key;
}

void encode_offer(const transport::TagOffer& offer, std::span<std::int64_t> out) {
  out[0] = offer.busy ? 1 : 0;
  out[1] = offer.last;
  for (std::size_t w = 0; w < transport::kTagMaskWords; ++w)
    out[2 + w] = static_cast<std::int64_t>(offer.used[w]);
}

class Table {
 public:
  Table(const std::int64_t* rows, int size) : rows_(rows), size_(size) {}
  int size() const noexcept { return size_; }
  std::int64_t at(int rank, std::size_t word) const noexcept {
    return rows_[static_cast<std::size_t>(rank) * kRowWords + word];
  }
  transport::TagOffer offer(int rank) const noexcept {
    transport::TagOffer offer;
    offer.busy = at(rank, kOffer) != 0;
    offer.last = static_cast<std::uint32_t>(at(rank, kOffer + 1));
    for (std::size_t w = 0; w < transport::kTagMaskWords; ++w)
      offer.used[w] = static_cast<std::uint64_t>(at(rank, kOffer + 2 + w));
    return offer;
  }

 private:
  const std::int64_t* rows_;
  int size_;
};

/// One new communicator: its members (parent ranks, in new rank order), its place among the
/// split's groups (which id of the reserved block it takes) and its tag id.
struct Group {
  std::vector<int> members;
  std::uint32_t index = 0;
  std::optional<std::uint32_t> tag_id;
};

struct Plan {
  std::map<std::int64_t, Group> groups;  ///< by color
  bool retry = false;  ///< some group found no common free tag id while a member was busy
};

/// What every member computes from the same table, so every member reaches the same plan.
Plan plan_split(const Table& rows) {
  Plan plan;
  std::map<std::int64_t, std::vector<std::pair<std::int64_t, int>>> keyed;
  for (int r = 0; r < rows.size(); ++r)
    if (rows.at(r, kColor) != Communicator::kNoColor)
      keyed[rows.at(r, kColor)].emplace_back(rows.at(r, kKey), r);
  std::uint32_t index = 0;
  for (auto& [color, members] : keyed) {
    std::sort(members.begin(), members.end());  // by key, then parent rank
    Group& group = plan.groups[color];
    group.index = index++;
    std::vector<transport::TagOffer> offers;
    bool busy = false;
    for (const auto& [key, r] : members) {
      group.members.push_back(r);
      offers.push_back(rows.offer(r));
      busy = busy || offers.back().busy;
    }
    if (group.members.size() < 2) continue;  // a group of one needs no tag id
    group.tag_id = transport::TagIdPool::choose(offers);
    plan.retry = plan.retry || (!group.tag_id && busy);
  }
  return plan;
}

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
  const std::shared_ptr<transport::TagIdPool> pool = impl.transport->tag_ids();
  // Ids for every group this split could make: the parent's first rank reserves them before the
  // exchange (usually from its block, without a store round trip) and puts the first in its row.
  // Should rank 0 fail to (the store unreachable, the ids used up), it still joins the exchange
  // with its error's code in place of an id, so every rank fails the split alike and the parent
  // stays in step: throwing before it would leave the others in an allgather nobody joins.
  std::int64_t id_base = -1;
  std::exception_ptr reserve_failure;
  if (impl.rank == 0) {
    try {
      id_base = impl.ids->reserve(*impl.store, static_cast<std::uint32_t>(impl.size));
    } catch (const Error& e) {
      reserve_failure = std::current_exception();
      id_base = kReserveFailed - static_cast<std::int64_t>(e.code());
    } catch (...) {
      reserve_failure = std::current_exception();
      id_base = kReserveFailed - static_cast<std::int64_t>(ErrorCode::Internal);
    }
  }
  const auto deadline = std::chrono::steady_clock::now() + impl.default_timeout;
  for (int attempt = 1;; ++attempt) {
    const transport::TagOffer offer = pool ? pool->offer() : transport::TagOffer{};
    // Ends the offer on every path out (an exception from the exchange included).
    struct OfferGuard {
      transport::TagIdPool* pool;
      const transport::TagOffer& offer;
      bool open = true;
      void finish(std::optional<std::uint32_t> id) {
        open = false;
        if (pool) pool->finish(offer, id);
      }
      ~OfferGuard() {
        if (open && pool) pool->finish(offer, std::nullopt);
      }
    } guard{pool.get(), offer};

    // Everyone learns everyone's row through the parent, in its op order.
    std::array<std::int64_t, kRowWords> mine{};
    mine[kColor] = color;
    mine[kKey] = key;
    mine[kNode] = host_key();
    mine[kIdBase] = id_base;
    // Whether to give up is decided from the table, like everything else: a rank whose own
    // deadline passed stopping alone would leave the others in an allgather nobody joins.
    mine[kOutOfTime] = std::chrono::steady_clock::now() >= deadline ? 1 : 0;
    encode_offer(offer, std::span(mine).subspan(kOffer));
    Buffer table = Buffer::allocate(kRowWords * static_cast<std::size_t>(impl.size), DType::Int64);
    allgather(Buffer::view(mine.data(), mine.size(), DType::Int64), table);
    const Table rows(table.data_as<const std::int64_t>(), impl.size);
    if (const std::int64_t base = rows.at(0, kIdBase); base <= kReserveFailed) {
      if (reserve_failure) std::rethrow_exception(reserve_failure);
      const std::int64_t code = kReserveFailed - base;
      throw Error(code <= static_cast<std::int64_t>(ErrorCode::Internal)
                      ? static_cast<ErrorCode>(code)
                      : ErrorCode::Internal,
                  fmt::format("split of communicator {}: rank 0 could not reserve ids for the "
                              "new communicators (its error says why)",
                              impl.id));
    }

    const Plan plan = plan_split(rows);
    if (plan.retry) {
      guard.finish(std::nullopt);
      // Another thread of some member was allocating at the same time; every member saw the same
      // table, so all of them try again together, or give up together once any member's
      // deadline has passed.
      std::string late;
      for (int r = 0; r < rows.size(); ++r)
        if (rows.at(r, kOutOfTime) != 0) late += (late.empty() ? "" : ", ") + std::to_string(r);
      if (!late.empty())
        throw Error(
            ErrorCode::Timeout,
            fmt::format("split of communicator {}: {} attempts to agree on a free tag id "
                        "failed while other splits ran concurrently on member processes "
                        "(deadline passed on rank{} {})",
                        impl.id, attempt, late.find(',') == std::string::npos ? "" : "s", late));
      std::this_thread::yield();
      continue;
    }
    // Every parent rank takes part in NCCL's split too, when the parent has an NCCL
    // communicator, so the new communicator's GPU ops need no set-up of their own. The child is
    // aborted if the split fails from here on, before the new communicator owns it. Its own
    // deadline: the retries above may have used up most of theirs on one rank and not on
    // another (the table said go on), and NCCL's split is collective.
    std::optional<gpu::NcclChild> nccl =
        impl.gpu ? impl.gpu->split_nccl(color, key,
                                        std::chrono::steady_clock::now() + impl.default_timeout)
                 : std::nullopt;
    if (color == kNoColor) return nullptr;  // the guard ends the offer
    const Group& group = plan.groups.at(color);
    const auto me = std::find(group.members.begin(), group.members.end(), impl.rank);
    COHORT_CHECK(me != group.members.end());
    const int new_rank = static_cast<int>(me - group.members.begin());
    const int new_size = static_cast<int>(group.members.size());
    if (new_size > 1 && !group.tag_id)
      throw Error(ErrorCode::InvalidUsage,
                  fmt::format("split of communicator {}: every one of the {} tag ids is in use by "
                              "some member's live communicators; destroy communicators that are "
                              "no longer needed",
                              impl.id, transport::kTagIds));
    const int local_size =
        static_cast<int>(std::count_if(group.members.begin(), group.members.end(),
                                       [&](int r) { return rows.at(r, kNode) == host_key(); }));

    comm::CommunicatorSetup setup;
    setup.id = static_cast<std::uint32_t>(rows.at(0, kIdBase)) + group.index;
    setup.rank = new_rank;
    setup.size = new_size;
    setup.node_rank = impl.node_rank;
    setup.local_size = local_size;
    setup.host_ranks = impl.host_ranks;
    setup.arena_eligible = local_size == new_size;
    setup.default_timeout = impl.default_timeout;
    setup.debug_detail = impl.debug_detail;
    setup.job_id = impl.job_id;
    if (new_size == 1 || !pool) {
      guard.finish(std::nullopt);
      return comm::make_communicator(comm::derive_communicator(
          impl, setup, group.members, transport::TagIdClaim(), std::move(nccl)));
    }
    guard.finish(group.tag_id);
    transport::TagIdClaim claim(pool, *group.tag_id);  // released if anything below throws
    return comm::make_communicator(
        comm::derive_communicator(impl, setup, group.members, std::move(claim), std::move(nccl)));
  }
}

std::shared_ptr<Communicator> Communicator::dup() {
  return split(0, impl_->rank);
}

}  // namespace cohort
