#include "soak_plan.hpp"

#include <cohort/communicator.hpp>

#include <algorithm>
#include <array>
#include <iterator>
#include <map>
#include <sstream>
#include <tuple>

namespace cohort::soak {
namespace {

// The op mix: how often each collective is drawn, relative to the others. Allreduce leads as it
// does in training; every other collective, its v-form and the ring exchange stay frequent enough
// that thousands of ops cover each with every dtype many times.
struct Weighted {
  Collective collective;
  unsigned weight;
};
constexpr std::array kOpMix{
    Weighted{Collective::Allreduce, 16}, Weighted{Collective::Broadcast, 8},
    Weighted{Collective::Reduce, 8},     Weighted{Collective::Allgather, 7},
    Weighted{Collective::Allgatherv, 4}, Weighted{Collective::Gather, 5},
    Weighted{Collective::Gatherv, 3},    Weighted{Collective::Scatter, 5},
    Weighted{Collective::Scatterv, 3},   Weighted{Collective::ReduceScatter, 8},
    Weighted{Collective::Alltoall, 6},   Weighted{Collective::Alltoallv, 4},
    Weighted{Collective::Barrier, 4},    Weighted{Collective::Send, 5},
};

// Step kinds, per 100 steps: a batch on the world, a split with batches on the groups, a dup.
constexpr unsigned kBatchSteps = 80;
constexpr unsigned kSplitSteps = 14;
constexpr unsigned kDupSteps = 6;

// Largest batch: enough async ops to overlap several, few enough that their buffers stay small.
constexpr std::size_t kMaxBatchOps = 5;
constexpr std::size_t kMaxGroupOps = 4;

bool has_in_place_form(Collective c) {
  switch (c) {
    case Collective::Reduce:
    case Collective::Alltoallv:
    case Collective::Barrier:
    case Collective::Send: return false;
    default: return true;
  }
}

bool has_root(Collective c) {
  switch (c) {
    case Collective::Broadcast:
    case Collective::Reduce:
    case Collective::Gather:
    case Collective::Gatherv:
    case Collective::Scatter:
    case Collective::Scatterv: return true;
    default: return false;
  }
}

}  // namespace

bool is_reducing(Collective c) noexcept {
  return c == Collective::Allreduce || c == Collective::Reduce || c == Collective::ReduceScatter;
}

std::string soak_op_name(Collective c) {
  if (c == Collective::Send) return "sendrecv";
  return std::string(collective_name(c));
}

std::string describe(const OpSpec& op) {
  std::ostringstream text;
  text << "op #" << op.index << " " << soak_op_name(op.collective);
  if (op.collective != Collective::Barrier) {
    text << " " << dtype_name(op.dtype);
    if (is_reducing(op.collective)) text << " " << reduce_op_name(op.op);
    text << " count=" << op.count;
  }
  if (!op.counts.empty()) {
    text << " counts=[";
    for (std::size_t i = 0; i < op.counts.size(); ++i) text << (i ? "," : "") << op.counts[i];
    text << "]";
  }
  if (has_root(op.collective)) text << " root=" << op.root;
  if (op.collective == Collective::Send) text << " shift=" << op.shift << " tag=" << op.tag;
  if (op.in_place) text << " in-place";
  if (op.async) text << " async";
  if (op.algorithm != Algorithm::Auto) text << " algo=" << algorithm_name(op.algorithm);
  if (op.misalign) text << " misalign=" << op.misalign;
  if (op.non_root_buffer && has_root(op.collective)) text << " non-root-buffer";
  if (op.explicit_timeout) text << " explicit-timeout";
  return text.str();
}

PlanGenerator::PlanGenerator(std::uint64_t seed, PlanShape shape)
    : rng_(hash_words({seed, 0x50414b})), shape_(shape) {}

std::size_t PlanGenerator::draw_count() {
  // Size classes: empty, small (latency paths, inline pieces), medium, and large (past the
  // shared arena's 256 KiB slots and the rendezvous thresholds, so pipelines take several steps).
  const std::array<unsigned, 4> classes{8, 42, 35, 15};
  switch (rng_.weighted(classes)) {
    case 0: return 0;
    case 1: return rng_.between(1, 64);
    case 2: return rng_.between(65, 4096);
    default: return rng_.between(4097, std::max<std::size_t>(4097, shape_.max_count));
  }
}

OpSpec PlanGenerator::make_op(int size) {
  const auto n = static_cast<std::size_t>(size);
  OpSpec op;
  op.index = next_index_++;
  std::array<unsigned, kOpMix.size()> weights{};
  for (std::size_t i = 0; i < kOpMix.size(); ++i) weights[i] = kOpMix[i].weight;
  op.collective = kOpMix[rng_.weighted(weights)].collective;
  // A world of one has no peer to exchange with.
  if (op.collective == Collective::Send && size < 2) op.collective = Collective::Barrier;

  op.dtype = rng_.pick(std::span<const DType>(kAllDTypes));
  std::vector<ReduceOp> ops;
  for (ReduceOp r : kAllReduceOps)
    if (reduce_op_supports(r, op.dtype)) ops.push_back(r);
  op.op = rng_.pick(std::span<const ReduceOp>(ops));

  // Per-rank collectives spread the drawn size over the ranks, so every collective moves about
  // as many bytes per op.
  const std::size_t drawn = draw_count();
  switch (op.collective) {
    case Collective::Allreduce:
    case Collective::Broadcast:
    case Collective::Reduce:
    case Collective::Send: op.count = drawn; break;
    case Collective::Barrier: op.count = 0; break;
    default: op.count = (drawn + n - 1) / n; break;
  }
  if (op.collective == Collective::Allgatherv || op.collective == Collective::Gatherv ||
      op.collective == Collective::Scatterv) {
    for (std::size_t r = 0; r < n; ++r) op.counts.push_back(rng_.below(2 * op.count + 1));
  } else if (op.collective == Collective::Alltoallv) {
    for (std::size_t r = 0; r < n * n; ++r) op.counts.push_back(rng_.below(op.count + 1));
  }

  op.root = static_cast<int>(rng_.below(n));
  if (size > 1) op.shift = static_cast<int>(rng_.between(1, n - 1));
  op.tag = static_cast<int>(rng_.below(4));
  op.in_place = has_in_place_form(op.collective) && rng_.chance(1, 3);
  op.async = rng_.chance(1, 3);
  op.explicit_timeout = rng_.chance(1, 4);
  const std::span<const Algorithm> algorithms = implemented_algorithms(op.collective);
  if (!algorithms.empty() && rng_.chance(1, 2)) op.algorithm = rng_.pick(algorithms);
  if (op.collective != Collective::Barrier && rng_.chance(1, 4))
    op.misalign = static_cast<unsigned>(rng_.between(1, 3));
  op.non_root_buffer = rng_.chance(1, 2);
  return op;
}

Batch PlanGenerator::make_batch(int size, std::size_t max_ops) {
  Batch batch;
  const std::size_t ops = rng_.chance(3, 4) ? 1 : rng_.between(2, max_ops);
  for (std::size_t i = 0; i < ops; ++i) batch.ops.push_back(make_op(size));
  batch.wait_order = rng_.permutation(ops);
  return batch;
}

SplitPlan PlanGenerator::make_split(int parent_size, int depth) {
  SplitPlan split;
  const auto n = static_cast<std::size_t>(parent_size);
  const std::size_t groups = rng_.between(1, std::min<std::size_t>(3, n));
  for (std::size_t r = 0; r < n; ++r) {
    // Colors are sparse and unordered (0, 7, 14, ...): a color is a label, not an index.
    split.colors.push_back(rng_.chance(1, 8) ? Communicator::kNoColor
                                             : static_cast<int>(7 * rng_.below(groups)));
    split.keys.push_back(static_cast<int>(rng_.below(3)));
  }
  std::map<int, std::vector<std::tuple<int, int>>> by_color;  // color -> (key, parent rank)
  for (std::size_t r = 0; r < n; ++r) {
    if (split.colors[r] == Communicator::kNoColor) continue;
    by_color[split.colors[r]].emplace_back(split.keys[r], static_cast<int>(r));
  }
  for (auto& [color, ranks] : by_color) {
    std::sort(ranks.begin(), ranks.end());
    SplitPlan::Group group;
    group.color = color;
    for (const auto& [key, rank] : ranks) group.members.push_back(rank);
    const int size = static_cast<int>(group.members.size());
    group.batch = make_batch(size, kMaxGroupOps);
    if (depth == 0 && size >= 2 && rng_.chance(1, 5)) {
      group.nested.push_back(make_split(size, depth + 1));
      group.release_parent_first = rng_.chance(1, 2);
    }
    split.groups.push_back(std::move(group));
  }
  return split;
}

Step PlanGenerator::next() {
  const std::array<unsigned, 3> kinds{kBatchSteps, kSplitSteps, kDupSteps};
  switch (rng_.weighted(kinds)) {
    case 1: return make_split(shape_.world_size, 0);
    case 2: {
      DupPlan dup;
      dup.first = make_op(shape_.world_size);
      dup.second = make_op(shape_.world_size);
      dup.first.async = true;
      dup.second.async = false;
      dup.first_on_dup = rng_.chance(1, 2);
      return dup;
    }
    default: return make_batch(shape_.world_size, kMaxBatchOps);
  }
}

}  // namespace cohort::soak
