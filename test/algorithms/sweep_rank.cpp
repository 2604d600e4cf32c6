// SweepRank plumbing: transport, contexts, cases, checks. The per-collective sweeps live in
// sweep_reducing.cpp and sweep_moving.cpp.

#include "sweep_rank.hpp"

#include "sweep_data.hpp"

#include "support/heap_keeps_freed.hpp"
#include "transport/transport_factory.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <stdexcept>

namespace cohort::sweep {
namespace {

constexpr DType kSweptDTypes[] = {DType::Float32, DType::Float64, DType::BFloat16, DType::Float16,
                                  DType::Int32,   DType::Int64,   DType::UInt8};

/// The large count's few combinations when not sweeping all: multi-chunk f64, bf16 rounding
/// through float, integer wrap-around and bitwise ops.
constexpr Case kLargeSubset[] = {
    {kLargeCount, DType::Float32, ReduceOp::Sum},  {kLargeCount, DType::Float64, ReduceOp::Max},
    {kLargeCount, DType::BFloat16, ReduceOp::Sum}, {kLargeCount, DType::Int32, ReduceOp::BXor},
    {kLargeCount, DType::UInt8, ReduceOp::Prod},
};

/// Per-op deadline: generous, because 7 ranks share 2 cores; a hang still fails the op.
constexpr auto kOpTimeout = std::chrono::seconds(120);

}  // namespace

void expect(bool ok, const std::string& message) {
  if (!ok) throw std::runtime_error("sweep check failed: " + message);
}

std::string describe(Collective collective, Algorithm algorithm, const Case& c, int rank, int size,
                     const std::string& extra) {
  return std::string(collective_name(collective)) + " " + std::string(algorithm_name(algorithm)) +
         " " + std::string(dtype_name(c.dtype)) + " " + std::string(reduce_op_name(c.op)) +
         " count " + std::to_string(c.count) + (extra.empty() ? "" : " " + extra) + " (rank " +
         std::to_string(rank) + " of " + std::to_string(size) + ")";
}

std::vector<Case> reducing_cases(const SweepPlan& plan) {
  std::vector<Case> cases;
  auto add_all = [&](std::size_t count) {
    for (DType dtype : kSweptDTypes)
      for (ReduceOp op : kAllReduceOps)
        if (op_applies(op, dtype)) cases.push_back({count, dtype, op});
  };
  for (std::size_t count : plan.counts) add_all(count);
  if (plan.large_all)
    add_all(kLargeCount);
  else if (plan.large_subset)
    cases.insert(cases.end(), std::begin(kLargeSubset), std::end(kLargeSubset));
  return cases;
}

std::vector<Case> moving_cases(const SweepPlan& plan) {
  std::vector<Case> cases;
  for (const Case& c : reducing_cases(plan)) {
    const bool seen = std::any_of(cases.begin(), cases.end(), [&](const Case& x) {
      return x.count == c.count && x.dtype == c.dtype;
    });
    if (!seen) cases.push_back({c.count, c.dtype, ReduceOp::Sum});
  }
  return cases;
}

bool must_decline(Collective collective, Algorithm algorithm, int world_size, bool uniform) {
  const bool power_of_two = (world_size & (world_size - 1)) == 0;
  if (collective == Collective::Allgather && algorithm == Algorithm::RecursiveDoubling)
    return !power_of_two;
  if (collective == Collective::Alltoall && algorithm == Algorithm::Bruck) return !uniform;
  // Every sweep runs on one host, where there is no hierarchy to use (comm_hierarchical tests it
  // across simulated hosts).
  if (algorithm == Algorithm::Hierarchical) return true;
  // A world of one has no peer to copy from (where the kernel refuses cross-process reads,
  // check_ran expects a decline on every world).
  if (algorithm == Algorithm::SingleCopy) return world_size == 1;
  return false;
}

namespace {
std::atomic<bool> g_mappable{false};
}  // namespace

void use_mappable_buffers(bool on) noexcept {
  g_mappable.store(on, std::memory_order_relaxed);
}
bool mappable_buffers() noexcept {
  return g_mappable.load(std::memory_order_relaxed);
}

std::size_t SweepRank::peer_mappings() const {
  const transport::SharedArena* arena = arena_->existing();
  return arena == nullptr ? 0 : arena->peer_mappings();
}

bool SweepRank::single_copy() const {
  const transport::SharedArena* arena = arena_->existing();
  return arena != nullptr && arena->single_copy();
}

SweepRank::SweepRank(const Environment& env)
    : rank_(env.rank), size_(env.world_size), store_(connect_store(env)) {
  // The large count's buffers: 2-4 MiB each, several per op.
  test::keep_freed_memory_in_heap();
  transport::TransportOptions options;
  options.local_world_size = env.local_world_size;
  options.connect_timeout = std::chrono::seconds(60);
  transport_ = transport::create_transport(*store_, "sweep", rank_, size_, options);
  arena_ = std::make_unique<transport::LazyArena>(env.local_world_size, size_ > 1);
  // Every sweep runs on one host: the shared-memory algorithms must not silently decline.
  expect(size_ == 1 || context(Collective::Barrier).arena() != nullptr,
         "no shared arena on a single-host sweep");
}

SweepRank::~SweepRank() = default;

algorithms::OpContext SweepRank::context(Collective collective) {
  const std::uint32_t seq = seq_++;
  what_ = std::string(collective_name(collective)) + " #" + std::to_string(seq);
  return algorithms::OpContext{*transport_, rank_, size_,
                               3,           seq,   std::chrono::steady_clock::now() + kOpTimeout,
                               scratch_,    what_, arena_.get()};
}

void SweepRank::check_ran(Collective collective, Algorithm forced, Algorithm ran, bool uniform,
                          const std::string& what) const {
  // Single copy declines on every rank alike where the kernel does not let ranks read each
  // other's memory (the arena's set-up found out; by the first op it exists).
  const transport::SharedArena* arena = arena_->existing();
  const bool unreadable =
      forced == Algorithm::SingleCopy && (arena == nullptr || !arena->single_copy());
  if (unreadable && size_ > 1 && rank_ == 0 && !warned_unreadable_) {
    std::printf(
        "single copy declines here (no cross-process reads): its forced runs are not "
        "checked\n");
    warned_unreadable_ = true;
  }
  if (must_decline(collective, forced, size_, uniform) || unreadable)
    expect(ran != forced,
           what + ": ran " + std::string(algorithm_name(ran)) + ", which should have declined");
  else
    expect(ran == forced,
           what + ": forced algorithm did not run; ran " + std::string(algorithm_name(ran)));
}

std::vector<int> SweepRank::roots() const {
  std::vector<int> roots{0};
  if (size_ > 2) roots.push_back(size_ / 2);
  if (size_ > 1) roots.push_back(size_ - 1);
  return roots;
}

}  // namespace cohort::sweep
