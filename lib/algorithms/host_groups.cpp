#include "algorithms/host_groups.hpp"

#include <cohort/error.hpp>

#include "algorithms/dispatch.hpp"
#include "core/mappable_memory.hpp"
#include "transport/host_identity.hpp"
#include "transport/kept_exchange.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <map>
#include <memory>
#include <utility>
#include <vector>

namespace cohort::algorithms {
namespace {

/// One rank's report: where it is, and (second round) whether its local group got an arena.
struct Identity {
  std::array<char, 240> text{};
};

/// Every rank sends `mine` to every other rank and receives theirs into `all` (once per
/// communicator, so the n^2 messages of a direct exchange are not worth a smarter pattern).
template <class T>
void exchange_all(transport::Transport& t, const T& mine, std::vector<T>& all, transport::Tag tag,
                  transport::Deadline deadline, const std::string& what) {
  const int n = t.size();
  const auto me = static_cast<std::size_t>(t.rank());
  // Kept by the transport should the exchange fail (transport/kept_exchange.hpp).
  auto memory = std::make_shared<std::vector<T>>(static_cast<std::size_t>(n), T{});
  (*memory)[me] = mine;
  transport::exchange_keeping(
      t, tag, memory,
      [&](std::vector<transport::Request>& requests) {
        for (int r = 0; r < n; ++r) {
          if (r == t.rank()) continue;
          requests.push_back(
              t.post_recv(r, &(*memory)[static_cast<std::size_t>(r)], sizeof(T), tag));
          requests.push_back(t.post_send(r, &(*memory)[me], sizeof(T), tag));
        }
      },
      deadline, what);
  all = *memory;
}

}  // namespace

HostGroups* HostGroups::get(const OpContext& ctx) {
  if (!decided_) {
    decided_ = true;
    set_up(ctx);
  }
  return usable_ ? this : nullptr;
}

void HostGroups::set_up(const OpContext& ctx) {
  transport::Transport& t = ctx.transport;
  Identity mine;
  const std::string identity = transport::local_host_identity();
  std::memcpy(mine.text.data(), identity.data(), std::min(identity.size(), mine.text.size() - 1));
  std::vector<Identity> all;
  exchange_all(t, mine, all, ctx.tag(kFirstSetupStep), ctx.deadline, ctx.what);

  // Hosts in the order of their first rank; members of each in rank order.
  std::map<std::string, int> host_of;
  std::vector<std::vector<int>> members;
  for (int r = 0; r < ctx.size; ++r) {
    const std::string key(all[static_cast<std::size_t>(r)].text.data());
    auto [it, fresh] = host_of.try_emplace(key, static_cast<int>(members.size()));
    if (fresh) members.emplace_back();
    members[static_cast<std::size_t>(it->second)].push_back(r);
  }
  hosts_ = static_cast<int>(members.size());
  std::size_t largest = 0;
  for (const auto& m : members) largest = std::max(largest, m.size());
  if (hosts_ < 2 || largest < 2) return;  // every rank saw the same table: all decline

  host_of_rank_.assign(static_cast<std::size_t>(ctx.size), 0);
  local_index_of_rank_.assign(static_cast<std::size_t>(ctx.size), 0);
  for (std::size_t h = 0; h < members.size(); ++h)
    for (std::size_t i = 0; i < members[h].size(); ++i) {
      host_of_rank_[static_cast<std::size_t>(members[h][i])] = static_cast<int>(h);
      local_index_of_rank_[static_cast<std::size_t>(members[h][i])] = static_cast<int>(i);
    }
  host_index_ = host_of.at(std::string(mine.text.data()));
  largest_host_ = static_cast<int>(largest);
  members_ = members;
  const std::vector<int>& local = members[static_cast<std::size_t>(host_index_)];
  local_size_ = static_cast<int>(local.size());
  local_rank_ = static_cast<int>(std::find(local.begin(), local.end(), ctx.rank) - local.begin());
  std::vector<int> leaders;
  for (const auto& m : members) leaders.push_back(m.front());
  {
    std::lock_guard lock(mutex_);
    local_ = t.derive(local, local_rank_, transport::TagIdClaim());
    if (is_leader()) leaders_ = t.derive(leaders, host_index_, transport::TagIdClaim());
    local_arenas_ = std::make_unique<transport::LazyArena>(host_ranks_, local_size_ > 1);
    local_->set_side_work(side_work_);
    if (leaders_) leaders_->set_side_work(side_work_);
    local_arenas_->set_side_work(side_work_);
    if (interrupted_) {
      local_->interrupt(*interrupted_);
      if (leaders_) leaders_->interrupt(*interrupted_);
      local_arenas_->interrupt(*interrupted_);
    }
  }
  // Each host's arena, over its own group; then everyone learns whether every host got one.
  const bool ready = local_size_ == 1 || local_arenas_->get(*local_, ctx.tag(kFirstSetupStep + 2),
                                                            ctx.deadline, ctx.what) != nullptr;
  std::vector<char> verdicts;
  exchange_all(t, static_cast<char>(ready ? 1 : 0), verdicts, ctx.tag(kFirstSetupStep + 1),
               ctx.deadline, ctx.what);
  usable_ = std::all_of(verdicts.begin(), verdicts.end(), [](char v) { return v != 0; });
}

OpContext HostGroups::local(const OpContext& ctx) const {
  return OpContext{*local_,      local_rank_, local_size_, ctx.tag_id,         ctx.seq,
                   ctx.deadline, ctx.scratch, ctx.what,    local_arenas_.get()};
}

OpContext HostGroups::leaders(const OpContext& ctx) const {
  if (!leaders_)
    throw Error(ErrorCode::Internal, "HostGroups::leaders on a rank that leads no host");
  return OpContext{*leaders_,    host_index_, hosts_,   ctx.tag_id, ctx.seq,
                   ctx.deadline, ctx.scratch, ctx.what, nullptr};
}

std::byte* HostGroups::mappable_staging(std::size_t bytes) noexcept {
  if (mappable_.base != nullptr && mappable_.bytes >= bytes)
    return static_cast<std::byte*>(mappable_.base);
  free_mappable(std::exchange(mappable_.base, nullptr));
  mappable_.bytes = 0;
  std::size_t rounded = 0;
  mappable_.base = allocate_mappable(bytes, &rounded);
  if (mappable_.base != nullptr) mappable_.bytes = rounded;
  return static_cast<std::byte*>(mappable_.base);
}

HostGroups::MappableBlock::~MappableBlock() {
  free_mappable(base);
}

void HostGroups::interrupt(const std::string& reason) noexcept {
  std::lock_guard lock(mutex_);
  try {
    if (!interrupted_) interrupted_ = reason;
  } catch (...) {
    // Out of memory copying the reason: the views below are still interrupted.
  }
  if (local_) local_->interrupt(reason);
  if (leaders_) leaders_->interrupt(reason);
  if (local_arenas_) local_arenas_->interrupt(reason);
}

std::shared_ptr<void> HostGroups::take_scratch() {
  struct Kept {
    ScratchPool staging, buffers;
    MappableBlock mappable;
  };
  auto kept = std::make_shared<Kept>();
  kept->staging = std::move(staging_);
  kept->buffers = std::move(buffers_);
  kept->mappable.base = std::exchange(mappable_.base, nullptr);
  kept->mappable.bytes = std::exchange(mappable_.bytes, 0);
  return kept;
}

void HostGroups::cancel_all() noexcept {
  std::lock_guard lock(mutex_);
  if (local_) local_->cancel_all();
  if (leaders_) leaders_->cancel_all();
}

void HostGroups::set_side_work(transport::SideWork* side_work) noexcept {
  std::lock_guard lock(mutex_);
  side_work_ = side_work;
  if (local_) local_->set_side_work(side_work);
  if (leaders_) leaders_->set_side_work(side_work);
  if (local_arenas_) local_arenas_->set_side_work(side_work);
}

void broadcast_from_leader(const OpContext& ctx, HostGroups& groups, void* out, std::size_t count,
                           DType dtype) {
  run_collective(groups.local(ctx), groups.staging(),
                 BroadcastArgs{groups.is_leader() ? out : nullptr, out, count, dtype, 0},
                 Algorithm::Auto);
}

}  // namespace cohort::algorithms
