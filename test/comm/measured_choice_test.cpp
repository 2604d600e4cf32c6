// The measured choice between the arena and single copy for large allreduces, reduces,
// reduce_scatters, broadcasts and scatters on one host, and uniform alltoalls on 3 ranks or more
// (lib/algorithms/measured_choice.hpp), through the public API on real processes: which
// algorithm each call ran (from the flight record), and that every call gives the bits of a
// plain float32 fold in rank order (or the root's vector), computed here, whichever algorithm
// ran (for reduce and reduce_scatter over ordinary and mappable buffers, whose single copy
// differs).

#include "algorithms/engines/single_copy.hpp"
#include "rank_checks.hpp"
#include "support/cross_process_reads.hpp"
#include "support/scoped_env.hpp"
#include "support/temp_dir.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

namespace {

using namespace cohort;
using namespace cohort::test;

/// 16 MiB and a little: the smallest large size class (4 trial calls, as below).
constexpr std::size_t kCount = 4 * 1024 * 1024 + 3;
/// The trials (arena, single copy, arena, single copy), then the vote and two of the winner's.
constexpr int kCalls = 7;

/// Rank r's element i: inexact in float32, so a sum's bits depend on its order.
float input(int rank, std::size_t i) {
  const auto h = static_cast<std::uint32_t>(i * 2654435761u + static_cast<unsigned>(rank) * 40503u);
  return static_cast<float>(static_cast<int>(h % 20001) - 10000) * 0.000123f *
         static_cast<float>(rank + 1);
}

/// Every rank's inputs, then their fold in rank order ((x0 + x1) + x2 ...), and for Avg the
/// division by the world size, as float32; operands are loaded from memory, so no multiply can
/// be fused into the sums.
std::vector<float> reference(int size, ReduceOp op) {
  std::vector<std::vector<float>> inputs(static_cast<std::size_t>(size),
                                         std::vector<float>(kCount));
  for (int r = 0; r < size; ++r)
    for (std::size_t i = 0; i < kCount; ++i) inputs[static_cast<std::size_t>(r)][i] = input(r, i);
  std::vector<float> folded = inputs[0];
  for (int r = 1; r < size; ++r)
    for (std::size_t i = 0; i < kCount; ++i) folded[i] += inputs[static_cast<std::size_t>(r)][i];
  if (op == ReduceOp::Avg)
    for (float& v : folded) v /= static_cast<float>(size);
  return folded;
}

/// The algorithms this rank's ops `name` of `count` elements ran, in order (the flight record).
std::vector<std::string> recorded_algorithms(Communicator& c, const std::string& name,
                                             std::size_t count) {
  const TempDir dir("cohort-measured-choice-test");
  const std::string path = (dir.path() / "record.json").string();
  c.dump_trace(path);
  std::ifstream in(path);
  const nlohmann::json record = nlohmann::json::parse(in);
  std::vector<std::string> ran;
  for (const auto& op : record.at("ops"))
    if (op.at("op") == name && op.at("count") == count)
      ran.push_back(op.at("algorithm").get<std::string>());
  return ran;
}

std::vector<std::string> allreduce_algorithms(Communicator& c) {
  return recorded_algorithms(c, "allreduce", kCount);
}

/// A reduce_scatter's block per rank: the whole input (size blocks) is just over 16 MiB, the
/// smallest large size class, as kCount is for allreduce.
std::size_t scatter_block(int size) {
  return kCount / static_cast<std::size_t>(size) + 1;
}

/// kCalls reduce_scatters of `op` over `memory`'s buffers, in pairs out of place and in place
/// (the output is the input's block of this rank), each checked bit for bit against the fold
/// in rank order of every rank's block of this rank.
void run_reduce_scatters(Communicator& c, ReduceOp op, bool mappable) {
  const std::size_t block = scatter_block(c.size());
  const std::size_t total = block * static_cast<std::size_t>(c.size());
  const std::size_t mine = block * static_cast<std::size_t>(c.rank());
  std::vector<float> expected(block);
  for (std::size_t i = 0; i < block; ++i) {
    float folded = input(0, mine + i);
    for (int r = 1; r < c.size(); ++r) folded += input(r, mine + i);
    expected[i] = op == ReduceOp::Avg ? folded / static_cast<float>(c.size()) : folded;
  }
  const auto allocate = [mappable](std::size_t n) {
    return mappable ? Buffer::allocate_mappable(n, DType::Float32)
                    : Buffer::allocate(n, DType::Float32);
  };
  Buffer in = allocate(total);
  Buffer out = allocate(block);
  for (int call = 0; call < kCalls; ++call) {
    auto* data = static_cast<float*>(in.data());
    for (std::size_t i = 0; i < total; ++i) data[i] = input(c.rank(), i);
    const bool in_place = (call / 2) % 2 == 1;
    Buffer result = in_place ? in.slice(static_cast<std::int64_t>(mine),
                                        static_cast<std::int64_t>(mine + block))
                             : out;
    c.reduce_scatter(in, result, op);
    const auto* got = static_cast<const float*>(result.data());
    for (std::size_t i = 0; i < block; ++i)
      RANK_CHECK(std::memcmp(&got[i], &expected[i], sizeof(float)) == 0,
                 "call " << call << (in_place ? " (in place)" : "") << ", element " << i << ": got "
                         << got[i] << ", expected " << expected[i]);
  }
}

/// kCalls allreduces of `op`, in pairs out of place and in place (so each algorithm's trials
/// run both), each checked bit for bit.
void run_allreduces(Communicator& c, ReduceOp op) {
  const std::vector<float> expected = reference(c.size(), op);
  Buffer in = Buffer::allocate(kCount, DType::Float32);
  Buffer out = Buffer::allocate(kCount, DType::Float32);
  for (int call = 0; call < kCalls; ++call) {
    auto* data = static_cast<float*>(in.data());
    for (std::size_t i = 0; i < kCount; ++i) data[i] = input(c.rank(), i);
    const bool in_place = (call / 2) % 2 == 1;
    c.allreduce(in, in_place ? in : out, op);
    const auto* got = static_cast<const float*>((in_place ? in : out).data());
    for (std::size_t i = 0; i < kCount; ++i)
      RANK_CHECK(std::memcmp(&got[i], &expected[i], sizeof(float)) == 0,
                 "call " << call << (in_place ? " (in place)" : "") << ", element " << i << ": got "
                         << got[i] << ", expected " << expected[i]);
  }
}

/// The environment these tests assume, whatever the caller's: arena and single copy allowed,
/// nothing forced, no fingerprinting.
struct PinnedEnvironment {
  ScopedEnv shared{"COHORT_SHARED_MEMORY", "auto"};
  ScopedEnv single{"COHORT_SINGLE_COPY", "auto"};
  ScopedEnv algo{"COHORT_ALGO", std::nullopt};
  ScopedEnv debug{"COHORT_DEBUG", std::nullopt};
  ScopedEnv measured{"COHORT_MEASURED_CHOICE", std::nullopt};
};

/// Whether single copy can run here; says so in the test's output when it cannot.
bool single_copy_runs_here() {
  if (siblings_can_read_each_other()) return true;
  WARN("this machine does not let ranks read each other's memory: nothing to choose between");
  return false;
}

/// Checks the schedule: the trials (the table's side first: the arena, or single copy where
/// the table runs it), then one winner on every later call.
void expect_trials_then_one(const std::vector<std::string>& ran,
                            const std::string& table = "shared_memory") {
  RANK_CHECK(ran.size() == kCalls, "recorded " << ran.size() << " ops");
  const std::string other = table == "shared_memory" ? "single_copy" : "shared_memory";
  const std::vector<std::string> trials{table, other, table, other};
  RANK_CHECK(std::vector<std::string>(ran.begin(), ran.begin() + 4) == trials,
             "trials ran " << ran[0] << ", " << ran[1] << ", " << ran[2] << ", " << ran[3]);
  // After the vote, the winner on every call (ranks that disagreed would have failed the op:
  // the arena compares what each rank runs).
  for (std::size_t call = 5; call < ran.size(); ++call)
    RANK_CHECK(ran[call] == ran[4],
               "call " << call << " ran " << ran[call] << ", call 4 " << ran[4]);
}

/// Every single-copy run took the mapped path over mappable buffers, and none over ordinary
/// ones: the results alone cannot tell the two paths apart.
void expect_mapped_runs(std::uint64_t mapped, const std::vector<std::string>& ran, bool mappable) {
  const auto single = static_cast<std::uint64_t>(std::count(ran.begin(), ran.end(), "single_copy"));
  RANK_CHECK(mapped == (mappable ? single : 0),
             mapped << " of " << single << " single-copy runs took the mapped path over "
                    << (mappable ? "mappable" : "ordinary") << " buffers");
}

void expect_only(const std::vector<std::string>& ran, const std::string& algorithm,
                 std::size_t calls = kCalls) {
  RANK_CHECK(ran.size() == calls, "recorded " << ran.size() << " ops");
  for (const std::string& a : ran) RANK_CHECK(a == algorithm, "ran " << a);
}

void expect_arena_only(const std::vector<std::string>& ran) {
  expect_only(ran, "shared_memory");
}

/// What a measured collective over `mappable` buffers ran: the trials then one winner where
/// single copy can run here, else the arena only; and the mapped path on exactly its
/// single-copy runs over mappable buffers (`mapped`: this process's count of them).
void expect_measured(const std::vector<std::string>& ran, std::uint64_t mapped, bool single_copy,
                     bool mappable) {
  if (single_copy)
    expect_trials_then_one(ran);
  else
    expect_arena_only(ran);
  expect_mapped_runs(mapped, ran, single_copy && mappable);
}

/// kCalls reduces of `op` to the last rank, over `mappable` buffers or ordinary ones, in pairs
/// out of place and in place on the root, the root checking each bit for bit.
void run_reduces(Communicator& c, ReduceOp op, bool mappable) {
  const int root = c.size() - 1;
  const std::vector<float> expected =
      c.rank() == root ? reference(c.size(), op) : std::vector<float>{};
  const auto allocate = [mappable](std::size_t n) {
    return mappable ? Buffer::allocate_mappable(n, DType::Float32)
                    : Buffer::allocate(n, DType::Float32);
  };
  Buffer in = allocate(kCount);
  Buffer out = allocate(kCount);
  for (int call = 0; call < kCalls; ++call) {
    auto* data = static_cast<float*>(in.data());
    for (std::size_t i = 0; i < kCount; ++i) data[i] = input(c.rank(), i);
    const bool in_place = (call / 2) % 2 == 1;
    c.reduce(in, in_place ? in : out, op, root);
    if (c.rank() != root) continue;
    const auto* got = static_cast<const float*>((in_place ? in : out).data());
    for (std::size_t i = 0; i < kCount; ++i)
      RANK_CHECK(std::memcmp(&got[i], &expected[i], sizeof(float)) == 0,
                 "call " << call << (in_place ? " (in place)" : "") << ", element " << i << ": got "
                         << got[i] << ", expected " << expected[i]);
  }
}

/// The rooted movers' calls: kCalls of each form, alternating out of place (even calls) and in
/// place on the root (odd ones), so that a measurement which mixed the forms would run each
/// form's trials out of order.
constexpr int kRootedCalls = 2 * kCalls;

/// The algorithms one form's calls ran, out of kRootedCalls that alternate as above.
std::vector<std::string> form_calls(const std::vector<std::string>& ran, bool in_place) {
  std::vector<std::string> form;
  for (std::size_t call = in_place ? 1 : 0; call < ran.size(); call += 2) form.push_back(ran[call]);
  return form;
}

/// kRootedCalls broadcasts from `root`, every rank's output checked bit for bit against the
/// root's input as computed here; non-roots' outputs are overwritten before each call, so a
/// call that moved nothing fails.
void run_broadcasts(Communicator& c, int root) {
  Buffer in = Buffer::allocate(kCount, DType::Float32);
  Buffer out = Buffer::allocate(kCount, DType::Float32);
  auto* source = static_cast<float*>(in.data());
  for (int call = 0; call < kRootedCalls; ++call) {
    const bool in_place = call % 2 == 1;
    if (c.rank() == root) {
      // A different vector per call: a reader copying an earlier call's would fail.
      for (std::size_t i = 0; i < kCount; ++i) source[i] = input(root + call, i);
    }
    std::memset(out.data(), 0xff, out.nbytes());  // NaNs, unlike any input
    Buffer& result = c.rank() == root && in_place ? in : out;
    c.broadcast(in, result, root);
    const auto* got = static_cast<const float*>(result.data());
    for (std::size_t i = 0; i < kCount; ++i) {
      const float expected = input(root + call, i);
      RANK_CHECK(std::memcmp(&got[i], &expected, sizeof(float)) == 0,
                 "call " << call << (in_place ? " (in place)" : "") << ", element " << i << ": got "
                         << got[i] << ", expected " << expected);
    }
  }
}

/// Root r's element i of block b in call k (blocks of scatters and alltoalls), distinct per
/// call so a stale result fails.
float block_value(int from, int block, int call, std::size_t i) {
  return input(from * 31 + block * 7 + call, i);
}

/// `calls` scatters (scatterv with every count `block` where `variable`) of `block` elements per
/// rank from the last rank, out of place (even calls) and in place on the root (odd ones)
/// alternating, each rank's block checked bit for bit; outputs are overwritten before each call.
void run_scatters(Communicator& c, std::size_t block, int calls, bool variable = false) {
  const int root = c.size() - 1;
  const auto ranks = static_cast<std::size_t>(c.size());
  const std::vector<std::size_t> counts(ranks, block);
  Buffer in = Buffer::allocate(block * ranks, DType::Float32);
  Buffer out = Buffer::allocate(block, DType::Float32);
  const auto mine = static_cast<std::int64_t>(block * static_cast<std::size_t>(c.rank()));
  for (int call = 0; call < calls; ++call) {
    const bool in_place = call % 2 == 1;
    if (c.rank() == root) {
      auto* data = static_cast<float*>(in.data());
      for (int b = 0; b < c.size(); ++b)
        for (std::size_t i = 0; i < block; ++i)
          data[static_cast<std::size_t>(b) * block + i] = block_value(root, b, call, i);
    }
    std::memset(out.data(), 0xff, out.nbytes());
    Buffer result = c.rank() == root && in_place
                        ? in.slice(mine, mine + static_cast<std::int64_t>(block))
                        : out;
    if (variable)
      c.scatterv(in, result, counts, root);
    else
      c.scatter(in, result, root);
    const auto* got = static_cast<const float*>(result.data());
    for (std::size_t i = 0; i < block; ++i) {
      const float expected = block_value(root, c.rank(), call, i);
      RANK_CHECK(std::memcmp(&got[i], &expected, sizeof(float)) == 0,
                 "call " << call << (in_place ? " (in place)" : "") << ", element " << i << ": got "
                         << got[i] << ", expected " << expected);
    }
  }
}

/// `calls` gathers of `block` elements per rank to `root`, out of place (even calls) and in place
/// on the root (odd ones: its block already sits at its place in the output) alternating; the
/// root checks every block bit for bit, its output overwritten before each call (but for its own
/// block in place).
void run_gathers(Communicator& c, int root, std::size_t block, int calls) {
  const auto ranks = static_cast<std::size_t>(c.size());
  const auto me = static_cast<std::size_t>(c.rank());
  Buffer in = Buffer::allocate(block, DType::Float32);
  Buffer out = Buffer::allocate(c.rank() == root ? block * ranks : 0, DType::Float32);
  for (int call = 0; call < calls; ++call) {
    const bool in_place = call % 2 == 1;
    if (c.rank() == root) std::memset(out.data(), 0xff, out.nbytes());
    Buffer mine = c.rank() == root && in_place
                      ? out.slice(static_cast<std::int64_t>(me * block),
                                  static_cast<std::int64_t>((me + 1) * block))
                      : in;
    auto* data = static_cast<float*>(mine.data());
    for (std::size_t i = 0; i < block; ++i) data[i] = block_value(c.rank(), 0, call, i);
    c.gather(mine, out, root);
    if (c.rank() != root) continue;
    const auto* got = static_cast<const float*>(out.data());
    for (int from = 0; from < c.size(); ++from)
      for (std::size_t i = 0; i < block; ++i) {
        const float expected = block_value(from, 0, call, i);
        RANK_CHECK(std::memcmp(&got[static_cast<std::size_t>(from) * block + i], &expected,
                               sizeof(float)) == 0,
                   "call " << call << (in_place ? " (in place)" : "") << ", block from " << from
                           << ", element " << i);
      }
  }
}

/// kCalls uniform alltoalls of kCount / size elements per block (each rank's input just over 16
/// MiB), out of place and in place in pairs, every block checked bit for bit.
void run_alltoalls(Communicator& c) {
  const auto ranks = static_cast<std::size_t>(c.size());
  const std::size_t block = kCount / ranks + 1;
  Buffer in = Buffer::allocate(block * ranks, DType::Float32);
  Buffer out = Buffer::allocate(block * ranks, DType::Float32);
  for (int call = 0; call < kCalls; ++call) {
    const bool in_place = (call / 2) % 2 == 1;
    auto* data = static_cast<float*>(in.data());
    for (int b = 0; b < c.size(); ++b)
      for (std::size_t i = 0; i < block; ++i)
        data[static_cast<std::size_t>(b) * block + i] = block_value(c.rank(), b, call, i);
    if (!in_place) std::memset(out.data(), 0xff, out.nbytes());
    Buffer& result = in_place ? in : out;
    c.alltoall(in, result);
    const auto* got = static_cast<const float*>(result.data());
    for (int from = 0; from < c.size(); ++from)
      for (std::size_t i = 0; i < block; ++i) {
        const float expected = block_value(from, c.rank(), call, i);
        RANK_CHECK(std::memcmp(&got[static_cast<std::size_t>(from) * block + i], &expected,
                               sizeof(float)) == 0,
                   "call " << call << (in_place ? " (in place)" : "") << ", block from " << from
                           << ", element " << i << ": got "
                           << got[static_cast<std::size_t>(from) * block + i] << ", expected "
                           << expected);
      }
  }
}

/// Every call ran the same algorithm, whichever: no trials.
void expect_no_trials(const std::vector<std::string>& ran) {
  RANK_CHECK(ran.size() == kCalls, "recorded " << ran.size() << " ops");
  for (const std::string& a : ran) RANK_CHECK(a == ran[0], "ran " << a << ", call 0 " << ran[0]);
}

/// kRootedCalls of a rooted mover: each form's calls ran their own trials (the table's side
/// first), then one winner each, which may differ between the forms.
void expect_trials_then_one_per_form(const std::vector<std::string>& ran,
                                     const std::string& table) {
  RANK_CHECK(ran.size() == kRootedCalls, "recorded " << ran.size() << " ops");
  for (const bool in_place : {false, true}) {
    INFO((in_place ? "in place" : "out of place"));
    expect_trials_then_one(form_calls(ran, in_place), table);
  }
}

/// kRootedCalls of a rooted mover whose table runs the arena: measured per form where single
/// copy can run here, else the arena on every call.
void expect_arena_measured_per_form(const std::vector<std::string>& ran, bool single_copy) {
  if (single_copy)
    expect_trials_then_one_per_form(ran, "shared_memory");
  else
    expect_only(ran, "shared_memory", kRootedCalls);
}

}  // namespace

TEST_CASE(
    "measured choice: large scatters on 4 ranks try single copy (the table's) and the arena in "
    "each form apart, then keep one per form; scatters and uniform alltoalls on 2 ranks no trials",
    "[comm][multiproc]") {
  const bool scatter = GENERATE(true, false);
  const int ranks = scatter ? GENERATE(2, 4) : GENERATE(2, 3);
  CAPTURE(scatter, ranks);
  const PinnedEnvironment pinned;
  const bool single_copy = single_copy_runs_here();
  REQUIRE_NOTHROW(run_ranks(ranks, [single_copy, scatter](const Environment& env) {
    auto c = world(env);
    // Each rank's block: its input just over 16 MiB in all, the smallest large size class.
    // (Scatter not on 3 ranks: there the table runs single copy or the tree, without the arena.)
    const std::size_t block = kCount / static_cast<std::size_t>(c->size()) + 1;
    if (scatter) {
      run_scatters(*c, block, kRootedCalls);
      // The flight record counts a uniform op's elements per block.
      const std::vector<std::string> ran = recorded_algorithms(*c, "scatter", block);
      if (!single_copy)
        expect_only(ran, "shared_memory", kRootedCalls);
      else if (env.world_size >= 3)
        expect_trials_then_one_per_form(ran, "single_copy");
      else
        expect_only(ran, "single_copy", kRootedCalls);  // the table's, unmeasured
      return;
    }
    run_alltoalls(*c);
    const std::vector<std::string> ran = recorded_algorithms(*c, "alltoall", block);
    if (single_copy && env.world_size >= 3)
      expect_trials_then_one(ran, "single_copy");
    else
      expect_no_trials(ran);
  }));
}

TEST_CASE(
    "measured choice: a small class of scatters tries the arena (the table's) and single copy 8 "
    "times each in each form, scatterv sharing it; alltoallv is never measured",
    "[comm][multiproc]") {
  const PinnedEnvironment pinned;
  const bool single_copy = single_copy_runs_here();
  REQUIRE_NOTHROW(run_ranks(3, [single_copy](const Environment& env) {
    auto c = world(env);
    // 3 x 43690 float32: 524280 bytes in all, in the 256-512 KiB class, where the table runs
    // the arena. 16 trial calls of each form, alternating; then 4 scatterv calls of the same
    // layout, after each form's vote.
    constexpr std::size_t kBlock = 43690;
    constexpr int kTrials = 16;
    run_scatters(*c, kBlock, 2 * kTrials);
    run_scatters(*c, kBlock, 4, true);
    const std::vector<std::string> scatters = recorded_algorithms(*c, "scatter", kBlock);
    const std::vector<std::string> scatterv = recorded_algorithms(*c, "scatterv", 3 * kBlock);
    RANK_CHECK(scatters.size() == 2 * kTrials, "recorded " << scatters.size() << " scatters");
    RANK_CHECK(scatterv.size() == 4, "recorded " << scatterv.size() << " scatterv calls");
    // Calls 2k (out of place) and 2k + 1 (in place) are trial k of their form's class.
    for (std::size_t call = 0; call < scatters.size(); ++call) {
      const std::string expected =
          !single_copy || (call / 2) % 2 == 0 ? "shared_memory" : "single_copy";
      RANK_CHECK(scatters[call] == expected, "call " << call << " ran " << scatters[call]);
    }
    // Classes of their own would have started trials of their own (the arena, then single copy,
    // in each form).
    for (const bool in_place : {false, true}) {
      const std::vector<std::string> form = form_calls(scatterv, in_place);
      RANK_CHECK(form[0] == form[1], (in_place ? "in-place" : "out-of-place")
                                         << " scatterv ran " << form[0] << ", then " << form[1]);
    }

    // alltoallv: counts may differ per rank, so no class; the same layout as a uniform 512 KiB
    // alltoall, which would be measured.
    const std::size_t block = 43690;
    const std::vector<std::size_t> counts(3, block);
    Buffer in = Buffer::allocate(3 * block, DType::Float32);
    Buffer out = Buffer::allocate(3 * block, DType::Float32);
    for (int call = 0; call < kCalls; ++call) {
      auto* data = static_cast<float*>(in.data());
      for (int b = 0; b < 3; ++b)
        for (std::size_t i = 0; i < block; ++i)
          data[static_cast<std::size_t>(b) * block + i] = block_value(c->rank(), b, call, i);
      c->alltoallv(in, counts, out, counts);
      const auto* got = static_cast<const float*>(out.data());
      for (int from = 0; from < 3; ++from)
        for (std::size_t i = 0; i < block; ++i) {
          const float expected = block_value(from, c->rank(), call, i);
          RANK_CHECK(std::memcmp(&got[static_cast<std::size_t>(from) * block + i], &expected,
                                 sizeof(float)) == 0,
                     "alltoallv call " << call << ", block from " << from << ", element " << i);
        }
    }
    expect_no_trials(recorded_algorithms(*c, "alltoallv", 3 * block));
  }));
}

TEST_CASE(
    "measured choice: large broadcasts try the arena and single copy in each form apart, then "
    "keep one per form",
    "[comm][multiproc]") {
  const int size = GENERATE(2, 3, 4);
  CAPTURE(size);
  const PinnedEnvironment pinned;
  const bool single_copy = single_copy_runs_here();
  REQUIRE_NOTHROW(run_ranks(size, [single_copy](const Environment& env) {
    auto c = world(env);
    // Root 0 on 2 ranks, the last elsewhere: the others learn the form from whichever it is.
    const int root = env.world_size == 2 ? 0 : env.world_size - 1;
    run_broadcasts(*c, root);
    expect_arena_measured_per_form(recorded_algorithms(*c, "broadcast", kCount), single_copy);
  }));
}

TEST_CASE(
    "measured choice: large gathers try the arena and single copy in each form apart, then keep "
    "one per form",
    "[comm][multiproc]") {
  const int size = GENERATE(2, 3, 5);
  CAPTURE(size);
  const PinnedEnvironment pinned;
  const bool single_copy = single_copy_runs_here();
  REQUIRE_NOTHROW(run_ranks(size, [single_copy](const Environment& env) {
    auto c = world(env);
    // The output just over 16 MiB, the smallest large size class; root 1 (2 ranks) or 2.
    const std::size_t block = kCount / static_cast<std::size_t>(c->size()) + 1;
    const int root = std::min(2, env.world_size - 1);
    run_gathers(*c, root, block, kRootedCalls);
    expect_arena_measured_per_form(recorded_algorithms(*c, "gather", block), single_copy);
  }));
}

TEST_CASE(
    "measured choice: large allreduces try the arena and single copy, then keep one, "
    "with the bits of a rank-order fold",
    "[comm][multiproc]") {
  const int size = GENERATE(2, 3);
  const ReduceOp op = GENERATE(ReduceOp::Sum, ReduceOp::Avg);
  CAPTURE(size, op);
  const PinnedEnvironment pinned;
  const bool single_copy = single_copy_runs_here();
  REQUIRE_NOTHROW(run_ranks(size, [single_copy, op](const Environment& env) {
    auto c = world(env);
    run_allreduces(*c, op);
    if (single_copy)
      expect_trials_then_one(allreduce_algorithms(*c));
    else
      expect_arena_only(allreduce_algorithms(*c));
  }));
}

TEST_CASE(
    "measured choice: large reduce_scatters try the arena and single copy, then keep one, "
    "with the bits of a rank-order fold",
    "[comm][multiproc]") {
  const int size = GENERATE(2, 3);
  const ReduceOp op = GENERATE(ReduceOp::Sum, ReduceOp::Avg);
  const bool mappable = GENERATE(false, true);
  CAPTURE(size, op, mappable);
  const PinnedEnvironment pinned;
  const bool single_copy = single_copy_runs_here();
  REQUIRE_NOTHROW(run_ranks(size, [single_copy, op, mappable](const Environment& env) {
    auto c = world(env);
    const std::uint64_t before = algorithms::testing::mapped_reduce_scatters();
    run_reduce_scatters(*c, op, mappable);
    expect_measured(recorded_algorithms(*c, "reduce_scatter", scatter_block(env.world_size)),
                    algorithms::testing::mapped_reduce_scatters() - before, single_copy, mappable);
  }));
}

TEST_CASE(
    "measured choice: large reduces try the arena and single copy, then keep one, with the "
    "bits of a rank-order fold at the root",
    "[comm][multiproc]") {
  const int size = GENERATE(2, 3);
  const ReduceOp op = GENERATE(ReduceOp::Sum, ReduceOp::Avg);
  const bool mappable = GENERATE(false, true);
  CAPTURE(size, op, mappable);
  const PinnedEnvironment pinned;
  const bool single_copy = single_copy_runs_here();
  REQUIRE_NOTHROW(run_ranks(size, [single_copy, op, mappable](const Environment& env) {
    auto c = world(env);
    const std::uint64_t before = algorithms::testing::mapped_reduces();
    run_reduces(*c, op, mappable);
    expect_measured(recorded_algorithms(*c, "reduce", kCount),
                    algorithms::testing::mapped_reduces() - before, single_copy, mappable);
  }));
}

TEST_CASE("measured choice: COHORT_MEASURED_CHOICE=off on one rank keeps the arena on all",
          "[comm][multiproc]") {
  const PinnedEnvironment pinned;
  REQUIRE_NOTHROW(run_ranks(3, [](const Environment& env) {
    std::optional<ScopedEnv> off;
    if (env.rank == 1) off.emplace("COHORT_MEASURED_CHOICE", "off");
    auto c = world(env);
    run_allreduces(*c, ReduceOp::Sum);
    expect_arena_only(allreduce_algorithms(*c));
  }));
}

TEST_CASE("measured choice: a forced algorithm is not measured", "[comm][multiproc]") {
  const PinnedEnvironment pinned;
  REQUIRE_NOTHROW(run_ranks(2, [](const Environment& env) {
    auto c = world(env);
    Buffer b = Buffer::allocate(kCount, DType::Float32);
    std::memset(b.data(), 0, b.nbytes());
    CollectiveOptions forced;
    forced.algorithm = Algorithm::SharedMemory;
    for (int call = 0; call < kCalls; ++call) c->allreduce(b, b, ReduceOp::Sum, forced);
    expect_arena_only(allreduce_algorithms(*c));
  }));
}
