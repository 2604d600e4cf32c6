#include "soak_runner.hpp"

#include "soak_op.hpp"
#include "soak_plan.hpp"

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <memory>
#include <utility>
#include <vector>

namespace cohort::soak {
namespace {

using SteadyClock = std::chrono::steady_clock;

// Unwinds a survivor's run to run_soak once its first failure is recorded.
struct StopRun {};

enum class Scope { World, Split, NestedSplit, Dup };

// An op of the plan and the communicator this rank runs it on.
struct Placed {
  Communicator* comm;
  const OpSpec* op;
  std::string where;
  Scope scope;
};

const SplitPlan::Group* group_of(const SplitPlan& plan, int parent_rank) {
  const int color = plan.colors[static_cast<std::size_t>(parent_rank)];
  for (const SplitPlan::Group& g : plan.groups)
    if (g.color == color) return &g;
  return nullptr;
}

// The first op of a step (or of a nested split) and the sum over its ops of their
// communicator's size (how many rank-ops it has). A step without ops (every rank passed
// kNoColor) keeps the first index it was given: the index of the op after it.
struct StepCounts {
  std::uint64_t first_index = 0;
  std::uint64_t participations = 0;
  bool has_ops = false;
};

void add_batch(StepCounts& counts, const Batch& batch, std::size_t size) {
  if (!batch.ops.empty() && !counts.has_ops) {
    counts.first_index = batch.ops[0].index;
    counts.has_ops = true;
  }
  counts.participations += batch.ops.size() * size;
}

void add_split(StepCounts& counts, const SplitPlan& plan) {
  for (const SplitPlan::Group& g : plan.groups) {
    add_batch(counts, g.batch, g.members.size());
    for (const SplitPlan& inner : g.nested) add_split(counts, inner);
  }
}

StepCounts count_step(const Step& step, int world_size, std::uint64_t next_index) {
  StepCounts counts;
  counts.first_index = next_index;
  const auto n = static_cast<std::size_t>(world_size);
  if (const auto* batch = std::get_if<Batch>(&step)) add_batch(counts, *batch, n);
  if (const auto* split = std::get_if<SplitPlan>(&step)) add_split(counts, *split);
  if (std::holds_alternative<DupPlan>(step)) counts.participations = 2 * n;
  return counts;
}

class Runner {
 public:
  Runner(std::shared_ptr<Communicator> world, const SoakOptions& options)
      : world_(std::move(world)),
        options_(options),
        victim_(options.kill && options.kill->victim == world_->rank()),
        survivor_(options.kill && !victim_) {}

  RankOutcome run(const ProgressFn& progress);

 private:
  void warm_up();
  void run_step(const Step& step, const StepCounts& counts);
  void run_split(const SplitPlan& plan, std::uint64_t first_index);
  void run_dup(const DupPlan& plan);
  void execute(const std::vector<Placed>& ops, const std::vector<std::size_t>& wait_order);
  std::shared_ptr<Communicator> split_checked(Communicator& parent, const SplitPlan& plan,
                                              const std::string& where, std::uint64_t next_index);
  void closing_check();
  [[noreturn]] void die(std::vector<std::vector<Work>>& started, PreparedOp& op,
                        Communicator& comm);
  /// Records a survivor's first error (and tries the failed communicator once more), or fails
  /// the run when no error was expected.
  [[noreturn]] void on_error(const Error& e, std::uint64_t index, const std::string& op,
                             Communicator& failed, std::vector<std::string> others = {});
  void count(const Placed& p);
  void check_resources(const char* when, std::uint64_t next_index);
  [[noreturn]] void fail(const std::string& what) const {
    throw SoakFailure("seed " + std::to_string(options_.seed) + ", rank " +
                      std::to_string(world_->rank()) + ": " + what);
  }

  std::shared_ptr<Communicator> world_;
  SoakOptions options_;
  bool victim_;
  bool survivor_;
  RankOutcome outcome_;
  std::uint64_t participations_ = 0;
};

RankOutcome Runner::run(const ProgressFn& progress) {
  const auto start = SteadyClock::now();
  warm_up();
  outcome_.baseline = outcome_.peak = sample_resources();
  PlanGenerator plan(options_.seed, PlanShape{world_->size(), options_.max_count});
  try {
    while (plan.ops_generated() < options_.ops) {
      const std::uint64_t next_index = plan.ops_generated();
      const Step step = plan.next();
      const StepCounts counts = count_step(step, world_->size(), next_index);
      participations_ += counts.participations;
      outcome_.ops_planned = plan.ops_generated();
      run_step(step, counts);
      check_resources("after a step", plan.ops_generated());
      outcome_.seconds = std::chrono::duration<double>(SteadyClock::now() - start).count();
      if (progress) progress(outcome_);
    }
    closing_check();
  } catch (const StopRun&) {
    // A survivor's first error is recorded; what remains is the resource check below.
  }
  outcome_.end = sample_resources();
  check_resources("at the end", outcome_.ops_planned);
  outcome_.seconds = std::chrono::duration<double>(SteadyClock::now() - start).count();
  return outcome_;
}

void Runner::warm_up() {
  // Everything the world creates lazily (connections, its shared arena, its progress thread)
  // exists before the baseline is taken, so later growth is growth the plan caused.
  world_->barrier();
  Buffer one = Buffer::allocate(1, DType::Float32);
  one.data_as<float>()[0] = 1;
  CollectiveOptions shared;
  shared.algorithm = Algorithm::SharedMemory;  // declines (falls through) off one host
  world_->allreduce(one, ReduceOp::Sum, shared);
  world_->allreduce_async(one, one, ReduceOp::Sum).wait();
  const float expected = static_cast<float>(world_->size() * world_->size());
  if (one.data_as<float>()[0] != expected)
    fail("warm-up allreduce gave " + std::to_string(one.data_as<float>()[0]) + ", expected " +
         std::to_string(expected));
}

void Runner::run_step(const Step& step, const StepCounts& counts) {
  if (const auto* batch = std::get_if<Batch>(&step)) {
    std::vector<Placed> ops;
    for (const OpSpec& op : batch->ops) ops.push_back({world_.get(), &op, "world", Scope::World});
    execute(ops, batch->wait_order);
  } else if (const auto* split = std::get_if<SplitPlan>(&step)) {
    run_split(*split, counts.first_index);
  } else {
    run_dup(std::get<DupPlan>(step));
  }
}

std::shared_ptr<Communicator> Runner::split_checked(Communicator& parent, const SplitPlan& plan,
                                                    const std::string& where,
                                                    std::uint64_t next_index) {
  const int me = parent.rank();
  const auto r = static_cast<std::size_t>(me);
  std::shared_ptr<Communicator> sub;
  try {
    sub = parent.split(plan.colors[r], plan.keys[r]);
  } catch (const Error& e) {
    on_error(e, next_index, "split of " + where, parent);
  }
  const SplitPlan::Group* group = group_of(plan, me);
  const std::string call = "split of " + where + " with color " + std::to_string(plan.colors[r]) +
                           " key " + std::to_string(plan.keys[r]);
  if (!group) {
    if (sub) fail(call + " returned a communicator for kNoColor");
    return nullptr;
  }
  if (!sub) fail(call + " returned no communicator");
  const auto position = std::find(group->members.begin(), group->members.end(), me);
  const auto expected_rank = static_cast<int>(position - group->members.begin());
  if (sub->size() != static_cast<int>(group->members.size()) || sub->rank() != expected_rank) {
    fail(call + " gave rank " + std::to_string(sub->rank()) + " of " + std::to_string(sub->size()) +
         ", expected rank " + std::to_string(expected_rank) + " of " +
         std::to_string(group->members.size()));
  }
  return sub;
}

void Runner::run_split(const SplitPlan& plan, std::uint64_t first_index) {
  std::shared_ptr<Communicator> sub = split_checked(*world_, plan, "the world", first_index);
  ++outcome_.mix.splits;
  if (!sub) return;
  const SplitPlan::Group& group = *group_of(plan, world_->rank());
  const std::string where = "split color " + std::to_string(group.color);
  std::vector<Placed> ops;
  for (const OpSpec& op : group.batch.ops) ops.push_back({sub.get(), &op, where, Scope::Split});
  execute(ops, group.batch.wait_order);
  if (group.nested.empty()) return;

  const SplitPlan& inner_plan = group.nested.front();
  StepCounts inner_counts;
  inner_counts.first_index = group.batch.ops.back().index + 1;
  add_split(inner_counts, inner_plan);
  const int rank_in_group = sub->rank();  // the inner plan's colors are indexed by it
  std::shared_ptr<Communicator> inner =
      split_checked(*sub, inner_plan, where, inner_counts.first_index);
  ++outcome_.mix.nested_splits;
  // Communicators may go in any order: half the time the parent goes before its child runs.
  if (group.release_parent_first) sub.reset();
  if (!inner) return;
  const SplitPlan::Group& inner_group = *group_of(inner_plan, rank_in_group);
  const std::string inner_where = where + " / nested color " + std::to_string(inner_group.color);
  ops.clear();
  for (const OpSpec& op : inner_group.batch.ops)
    ops.push_back({inner.get(), &op, inner_where, Scope::NestedSplit});
  execute(ops, inner_group.batch.wait_order);
}

void Runner::run_dup(const DupPlan& plan) {
  std::shared_ptr<Communicator> dup;
  try {
    dup = world_->dup();
  } catch (const Error& e) {
    on_error(e, plan.first.index, "dup of the world", *world_);
  }
  ++outcome_.mix.dups;
  if (dup->size() != world_->size() || dup->rank() != world_->rank())
    fail("dup gave rank " + std::to_string(dup->rank()) + " of " + std::to_string(dup->size()));
  // The async op on one communicator overlaps the blocking op on the other.
  Placed first{world_.get(), &plan.first, "world (overlapping its dup)", Scope::World};
  Placed second{dup.get(), &plan.second, "dup of the world", Scope::Dup};
  if (plan.first_on_dup) {
    std::swap(first.comm, second.comm);
    std::swap(first.where, second.where);
    std::swap(first.scope, second.scope);
  }
  execute({first, second}, {0, 1});
}

void Runner::execute(const std::vector<Placed>& ops, const std::vector<std::size_t>& wait_order) {
  std::vector<std::unique_ptr<PreparedOp>> prepared(ops.size());
  std::vector<std::vector<Work>> started(ops.size());
  std::size_t current = 0;
  auto check = [&](std::size_t i) {
    try {
      prepared[i]->check();
    } catch (const CheckFailure& f) {
      fail(prepared[i]->describe_on(ops[i].where) + ": " + f.what());
    }
  };
  // Waits for every op still under way (none may outlive its buffers); returns every failure,
  // `first` (op `failed`'s) included, as (index into ops, error).
  auto drain = [&](std::size_t failed, const Error* first) {
    std::vector<std::pair<std::size_t, Error>> failures;
    if (first) failures.emplace_back(failed, *first);
    for (std::size_t i = 0; i < started.size(); ++i) {
      for (Work& w : started[i]) {
        try {
          w.wait();
        } catch (const Error& e) {
          if (i != failed || !first) failures.emplace_back(i, e);
        }
      }
    }
    return failures;
  };
  try {
    for (std::size_t i = 0; i < ops.size(); ++i) {
      current = i;
      const Placed& p = ops[i];
      prepared[i] = std::make_unique<PreparedOp>(*p.op, options_.seed, p.comm->rank(),
                                                 p.comm->size(), options_.timeout);
      if (victim_ && p.op->index >= options_.kill->at_op) die(started, *prepared[i], *p.comm);
      count(p);
      if (p.op->async) {
        started[i] = prepared[i]->start(*p.comm);
      } else {
        prepared[i]->run(*p.comm);
        check(i);
      }
    }
    for (std::size_t k : wait_order) {
      current = k;
      if (started[k].empty()) continue;
      for (Work& w : started[k]) w.wait();
      check(k);
    }
  } catch (const Error& e) {
    const auto failures = drain(current, &e);
    // The cause is the earliest op whose own error it is. Ops in flight when another op fails
    // are failed by the communicator's poisoning (InvalidUsage naming that op), whatever order
    // they were issued in, so they rank after any op with an error of its own.
    auto rank_of = [&](const std::pair<std::size_t, Error>& f) {
      return std::make_pair(f.second.code() == ErrorCode::InvalidUsage, ops[f.first].op->index);
    };
    const auto cause =
        std::min_element(failures.begin(), failures.end(),
                         [&](const auto& a, const auto& b) { return rank_of(a) < rank_of(b); });
    std::vector<std::string> others;
    for (auto f = failures.begin(); f != failures.end(); ++f) {
      if (f == cause) continue;
      others.push_back("op #" + std::to_string(ops[f->first].op->index) + " " +
                       std::string(error_code_name(f->second.code())));
    }
    const Placed& p = ops[cause->first];
    on_error(cause->second, p.op->index, prepared[cause->first]->describe_on(p.where), *p.comm,
             std::move(others));
  } catch (...) {
    drain(current, nullptr);
    throw;
  }
}

void Runner::closing_check() {
  // A victim that took part in no op at or after the kill's dies here, before the last op.
  if (victim_) {
    std::fprintf(stderr, "cohort-soak: rank %d kills itself before the closing allreduce\n",
                 world_->rank());
    std::fflush(nullptr);
    std::raise(SIGKILL);
  }
  Buffer total = Buffer::allocate(1, DType::UInt64);
  total.data_as<std::uint64_t>()[0] = outcome_.ops_executed;
  try {
    world_->allreduce(total, ReduceOp::Sum);
  } catch (const Error& e) {
    on_error(e, outcome_.ops_planned, "the closing allreduce of op counts on the world", *world_);
  }
  if (total.data_as<std::uint64_t>()[0] != participations_) {
    fail("the ranks took part in " + std::to_string(total.data_as<std::uint64_t>()[0]) +
         " ops in all; the plan has " + std::to_string(participations_));
  }
}

void Runner::die(std::vector<std::vector<Work>>& started, PreparedOp& op, Communicator& comm) {
  // What this rank started earlier finishes first, so the death falls at this op, not before.
  for (std::vector<Work>& works : started)
    for (Work& w : works) w.wait();
  const bool during = options_.kill->moment == KillMoment::DuringOp;
  std::fprintf(stderr, "cohort-soak: rank %d kills itself %s %s\n", world_->rank(),
               during ? "during" : "before", describe(op.spec()).c_str());
  if (during) {
    std::vector<Work> works = op.start(comm);
    // A few ms of the op (seed-chosen), so the death may fall while data moves.
    const auto ms = 1 + hash_words({options_.seed, op.spec().index}) % 20;
    try {
      works.front().wait(std::chrono::milliseconds(ms));
    } catch (const Error&) {
      // Expected: the others may not have joined yet.
    }
  }
  std::fflush(nullptr);
  std::raise(SIGKILL);
  std::abort();  // SIGKILL cannot be caught; this is never reached
}

void Runner::on_error(const Error& e, std::uint64_t index, const std::string& op,
                      Communicator& failed, std::vector<std::string> others) {
  if (!survivor_) fail(op + ": unexpected error: " + e.what());
  FailureSeen seen;
  seen.code = e.code();
  seen.what = e.what();
  seen.op_index = index;
  seen.op = op;
  seen.others = std::move(others);
  seen.detected_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(SteadyClock::now().time_since_epoch())
          .count();
  // The failed communicator must refuse further ops at once (it is poisoned).
  CollectiveOptions options;
  options.timeout = options_.timeout;
  const auto start = SteadyClock::now();
  try {
    failed.barrier(options);
  } catch (const Error& again) {
    seen.followup_code = again.code();
  }
  seen.followup_time =
      std::chrono::duration_cast<std::chrono::milliseconds>(SteadyClock::now() - start);
  outcome_.failure = std::move(seen);
  throw StopRun{};
}

void Runner::count(const Placed& p) {
  const OpSpec& op = *p.op;
  OpMix& mix = outcome_.mix;
  ++outcome_.ops_executed;
  ++mix.collectives[static_cast<std::size_t>(op.collective)];
  if (op.collective != Collective::Barrier) ++mix.dtypes[static_cast<std::size_t>(op.dtype)];
  if (is_reducing(op.collective)) ++mix.reduce_ops[static_cast<std::size_t>(op.op)];
  mix.async += op.async;
  mix.in_place += op.in_place;
  mix.forced_algorithm += op.algorithm != Algorithm::Auto;
  mix.misaligned += op.misalign != 0;
  mix.elements += op.count;
  switch (p.scope) {
    case Scope::World: ++mix.on_world; break;
    case Scope::Split: ++mix.on_split; break;
    case Scope::NestedSplit: ++mix.on_nested_split; break;
    case Scope::Dup: ++mix.on_dup; break;
  }
}

void Runner::check_resources(const char* when, std::uint64_t next_index) {
  const ProcessResources now = sample_resources();
  ProcessResources& peak = outcome_.peak;
  peak.fds = std::max(peak.fds, now.fds);
  peak.memfd_fds = std::max(peak.memfd_fds, now.memfd_fds);
  peak.memfd_mappings = std::max(peak.memfd_mappings, now.memfd_mappings);
  peak.threads = std::max(peak.threads, now.threads);
  const ProcessResources& base = outcome_.baseline;
  // No sub-communicator is alive here: its arena, descriptors and threads must be gone.
  const bool leaked = now.memfd_mappings > base.memfd_mappings || now.memfd_fds > base.memfd_fds ||
                      now.fds > base.fds + kFdSlack || now.threads > base.threads + kThreadSlack;
  if (leaked) {
    fail(std::string("resources grew ") + when + " (ops before #" + std::to_string(next_index) +
         "): " + to_string(now) + ", baseline " + to_string(base) + " (slack: " +
         std::to_string(kFdSlack) + " fds, " + std::to_string(kThreadSlack) + " threads)");
  }
}

}  // namespace

KillPlan kill_for_seed(std::uint64_t seed, int world_size, std::uint64_t ops) {
  SoakRandom rng(hash_words({seed, 0x4b494c4c}));
  KillPlan kill;
  kill.victim = static_cast<int>(rng.below(static_cast<std::uint64_t>(world_size)));
  kill.at_op = ops / 10 + rng.below(std::max<std::uint64_t>(1, ops * 8 / 10));
  kill.moment = rng.chance(1, 2) ? KillMoment::DuringOp : KillMoment::BeforeOp;
  return kill;
}

RankOutcome run_soak(const std::shared_ptr<Communicator>& world, const SoakOptions& options,
                     const ProgressFn& progress) {
  Runner runner(world, options);
  return runner.run(progress);
}

}  // namespace cohort::soak
