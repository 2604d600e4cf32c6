// Tiny broadcasts and reduces through the shared arena's eager lines (shared_arena.hpp): the
// writer (broadcast's root, reduce's non-roots) returns as soon as its bytes are in its line, up
// to SharedArena::kEagerDepth ops ahead of the slowest reader. Real ranks, real store, real UCX:
// - a root finishes kEagerDepth broadcasts before any other rank has started one (ordered
//   through store keys, not sleeps), the next one waits for them, and they read all 2 *
//   kEagerDepth in order;
// - non-roots finish kEagerDepth reduces (and gathers) before the root starts, and the root then
//   gets all their results; gatherv with empty blocks is exact;
// - long mixed sequences (rotating roots, every dtype size, eager and slot-sized vectors,
//   allreduce in between, in and out of place) give the values computed here by hand;
// - ranks that disagree about whether an op is eager fail naming both calls, not at the deadline;
//   ranks that make the same tiny call at different places of their op sequences fail too.

#include "rank_checks.hpp"
#include "support/scoped_env.hpp"
#include "transport/shared_arena.hpp"

#include <cohort/store.hpp>

#include <catch2/catch.hpp>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

using namespace cohort;
using namespace cohort::test;
using namespace std::chrono_literals;

/// The eager lines' depth: how far a writer may run ahead.
constexpr int kDepth = static_cast<int>(transport::SharedArena::kEagerDepth);
/// How far a writer whose payloads go to the lines' areas (over 56 bytes) may run ahead.
constexpr int kAreaDepth = static_cast<int>(transport::SharedArena::kEagerAreaDepth);
/// Floats in a broadcast that goes through the slots: twice the largest eager payload.
constexpr std::size_t kSlotFloats = 2 * transport::SharedArena::kEagerBytes / sizeof(float);

CollectiveOptions shared_memory() {
  CollectiveOptions o;
  o.algorithm = Algorithm::SharedMemory;
  o.timeout = 60s;
  return o;
}

/// Broadcast payload element j of op i from `root` (small integers: exact in every dtype).
double broadcast_value(int i, int root, std::size_t j) {
  return i * 100 + root * 10 + static_cast<double>(j);
}

/// Rank r's reduce contribution, element j of op i.
double contribution(int i, int r, std::size_t j) {
  return (r + 1) * (i % 7 + 1) + static_cast<double>(j);
}

/// Sum over ranks 0..n-1 of contribution(i, r, j), by the closed form.
double sum_of_contributions(int i, int n, std::size_t j) {
  return (i % 7 + 1) * n * (n + 1) / 2.0 + n * static_cast<double>(j);
}

/// Max over ranks: the last rank's, since contributions grow with the rank.
double max_of_contributions(int i, int n, std::size_t j) {
  return contribution(i, n - 1, j);
}

}  // namespace

TEST_CASE(
    "a root finishes kEagerDepth tiny broadcasts (kEagerAreaDepth larger ones) before any other "
    "rank starts one, and waits at the next one for the slowest reader",
    "[comm][multiproc][eager]") {
  const int size = GENERATE(2, 3, 5);
  // 56 bytes, the largest payload next to a line's flag (kDepth ahead), and the largest eager
  // payload, in an area (kAreaDepth ahead).
  const std::size_t floats = GENERATE(std::size_t{14}, kSlotFloats / 2);
  const int depth = floats == 14 ? kDepth : kAreaDepth;
  CAPTURE(size, floats, depth);
  REQUIRE_NOTHROW(run_ranks(size, [floats, depth](const Environment& env) {
    ScopedEnv shm("COHORT_SHARED_MEMORY", "auto");
    auto c = world(env);
    const std::shared_ptr<Store> store = connect_store(env);
    Buffer b = Buffer::allocate(floats, DType::Float32);
    c->barrier();  // sets the arena up, and every rank is past it
    const int root = env.world_size > 2 ? 1 : 0;
    // The root runs 2 * depth broadcasts in a row, the others start once it finished depth:
    // had one of the first depth waited for them, it never got there and they time out waiting
    // for the key. Broadcast depth + i reuses broadcast i's line (or area), so there the root
    // must wait until every reader took broadcast i (which it knows from its readers' progress,
    // cached): had it not waited, the readers, still fetching the key, would find later
    // broadcasts' values in the first ones' lines.
    if (env.rank == root) {
      for (int i = 0; i < 2 * depth; ++i) {
        if (i == depth) store->set_string("eager/root_done", "1");
        for (std::size_t j = 0; j < b.count(); ++j) set(b, j, broadcast_value(i, root, j));
        c->broadcast(b, root, shared_memory());
      }
    } else {
      store->get_string("eager/root_done", 60s);
      for (int i = 0; i < 2 * depth; ++i) {
        c->broadcast(b, root, shared_memory());
        expect_values(
            b, 0, b.count(), [&](std::size_t j) { return broadcast_value(i, root, j); },
            "broadcast " + std::to_string(i));
      }
    }
    c->barrier();
  }));
}

TEST_CASE("non-roots finish kEagerDepth tiny reduces before the root starts one",
          "[comm][multiproc][eager]") {
  const int size = GENERATE(2, 4);
  CAPTURE(size);
  REQUIRE_NOTHROW(run_ranks(size, [](const Environment& env) {
    ScopedEnv shm("COHORT_SHARED_MEMORY", "auto");
    auto c = world(env);
    const std::shared_ptr<Store> store = connect_store(env);
    Buffer in = Buffer::allocate(7, DType::Int64);  // 56 bytes
    Buffer out = Buffer::allocate(7, DType::Int64);
    c->barrier();
    const int root = env.world_size - 1;
    if (env.rank != root) {
      for (int i = 0; i < kDepth; ++i) {
        for (std::size_t j = 0; j < in.count(); ++j) set(in, j, contribution(i, env.rank, j));
        c->reduce(in, out, ReduceOp::Sum, root, shared_memory());
      }
      store->set_string("eager/done/" + std::to_string(env.rank), "1");
    } else {
      // Every non-root is through its kDepth reduces before the root has entered the first.
      std::vector<std::string> keys;
      for (int r = 0; r < env.world_size; ++r)
        if (r != root) keys.push_back("eager/done/" + std::to_string(r));
      store->wait(keys, 60s);
      for (int i = 0; i < kDepth; ++i) {
        for (std::size_t j = 0; j < in.count(); ++j) set(in, j, contribution(i, env.rank, j));
        c->reduce(in, out, ReduceOp::Sum, root, shared_memory());
        expect_values(
            out, 0, out.count(),
            [&](std::size_t j) { return sum_of_contributions(i, env.world_size, j); },
            "reduce " + std::to_string(i));
      }
    }
    c->barrier();
  }));
}

TEST_CASE("non-roots finish kEagerDepth tiny gathers before the root starts; gatherv is exact",
          "[comm][multiproc][eager]") {
  const int size = GENERATE(2, 3, 5);
  CAPTURE(size);
  REQUIRE_NOTHROW(run_ranks(size, [](const Environment& env) {
    ScopedEnv shm("COHORT_SHARED_MEMORY", "auto");
    auto c = world(env);
    const std::shared_ptr<Store> store = connect_store(env);
    const int n = env.world_size;
    const auto block_value = [](int i, int r, std::size_t j) {
      return i * 1000 + r * 100 + static_cast<double>(j);
    };
    c->barrier();
    const int root = n / 2;
    // 14 floats (56 bytes) per rank: the largest eager block.
    Buffer in = Buffer::allocate(14, DType::Float32);
    Buffer out = Buffer::allocate(14 * static_cast<std::size_t>(n), DType::Float32);
    if (env.rank != root) {
      for (int i = 0; i < kDepth; ++i) {
        for (std::size_t j = 0; j < 14; ++j) set(in, j, block_value(i, env.rank, j));
        c->gather(in, out, root, shared_memory());
      }
      store->set_string("eager/gathered/" + std::to_string(env.rank), "1");
    } else {
      std::vector<std::string> keys;
      for (int r = 0; r < n; ++r)
        if (r != root) keys.push_back("eager/gathered/" + std::to_string(r));
      store->wait(keys, 60s);
      for (int i = 0; i < kDepth; ++i) {
        for (std::size_t j = 0; j < 14; ++j) set(in, j, block_value(i, env.rank, j));
        c->gather(in, out, root, shared_memory());
        for (int r = 0; r < n; ++r)
          expect_values(
              out, 14 * static_cast<std::size_t>(r), 14,
              [&](std::size_t j) { return block_value(i, r, j); },
              "gather " + std::to_string(i) + " block " + std::to_string(r));
      }
    }
    // gatherv: rank r sends r % 4 int64s (0 to 3, so some blocks are empty), 40 times.
    std::vector<std::size_t> counts;
    std::size_t total = 0;
    for (int r = 0; r < n; ++r) {
      counts.push_back(static_cast<std::size_t>(r % 4));
      total += counts.back();
    }
    for (int i = 0; i < 40; ++i) {
      const int at = i % n;
      Buffer mine = Buffer::allocate(counts[static_cast<std::size_t>(env.rank)], DType::Int64);
      for (std::size_t j = 0; j < mine.count(); ++j) set(mine, j, block_value(i, env.rank, j));
      Buffer all = Buffer::allocate(total, DType::Int64);
      c->gatherv(mine, all, counts, at, shared_memory());
      if (env.rank != at) continue;
      std::size_t offset = 0;
      for (int r = 0; r < n; ++r) {
        const std::size_t count = counts[static_cast<std::size_t>(r)];
        expect_values(
            all, offset, count, [&](std::size_t j) { return block_value(i, r, j); },
            "gatherv " + std::to_string(i) + " block " + std::to_string(r));
        offset += count;
      }
    }
  }));
}

TEST_CASE("mixed sequences of eager and slot-sized broadcasts and reduces are exact",
          "[comm][multiproc][eager]") {
  const int size = GENERATE(2, 3, 4, 5);
  CAPTURE(size);
  REQUIRE_NOTHROW(run_ranks(size, [](const Environment& env) {
    ScopedEnv shm("COHORT_SHARED_MEMORY", "auto");
    auto c = world(env);
    const int n = env.world_size;
    const DType dtypes[] = {DType::Float32, DType::Float64, DType::Int32, DType::Int64};
    // 600 ops, about 430 of them eager: the eager lines wrap around more than once. Every 5th op
    // is slot-sized (the arena's other numbering), every 5th another the largest eager payload
    // (in the lines' own areas), every 9th an allreduce (whose tiny vectors use the flags'
    // inline bytes).
    for (int i = 0; i < 600; ++i) {
      const DType dtype = dtypes[i % 4];
      const std::size_t elements_max = 56 / dtype_size(dtype);
      const std::size_t count = i % 5 == 4 ? 3000
                                : i % 5 == 3
                                    ? transport::SharedArena::kEagerBytes / dtype_size(dtype)
                                    : 1 + static_cast<std::size_t>(i) % elements_max;
      const int root = (i / 2) % n;
      const bool in_place = i % 3 == 0;
      const std::string what = "op " + std::to_string(i) + " (" + std::to_string(count) + " of " +
                               std::string(dtype_name(dtype)) + ", root " + std::to_string(root) +
                               (in_place ? ", in place)" : ")");
      Buffer in = Buffer::allocate(count, dtype);
      Buffer out = in_place ? in : Buffer::allocate(count, dtype);
      if (i % 9 == 8) {
        for (std::size_t j = 0; j < count; ++j) set(in, j, contribution(i, env.rank, j));
        c->allreduce(in, out, ReduceOp::Max, shared_memory());
        expect_values(
            out, 0, count, [&](std::size_t j) { return max_of_contributions(i, n, j); },
            "allreduce " + what);
      } else if (i % 2 == 0) {
        for (std::size_t j = 0; j < count; ++j)
          set(in, j, env.rank == root ? broadcast_value(i, root, j) : -1.0);
        c->broadcast(in, out, root, shared_memory());
        expect_values(
            out, 0, count, [&](std::size_t j) { return broadcast_value(i, root, j); },
            "broadcast " + what);
      } else {
        for (std::size_t j = 0; j < count; ++j) set(in, j, contribution(i, env.rank, j));
        c->reduce(in, out, ReduceOp::Sum, root, shared_memory());
        if (env.rank == root) {
          expect_values(
              out, 0, count, [&](std::size_t j) { return sum_of_contributions(i, n, j); },
              "reduce " + what);
        }
      }
    }
    // Avg and Prod on the eager path, at the root, in rank order.
    Buffer avg = Buffer::allocate(3, DType::Float64);
    for (std::size_t j = 0; j < 3; ++j) set(avg, j, env.rank * 2.0 + static_cast<double>(j));
    c->reduce(avg, avg, ReduceOp::Avg, 0, shared_memory());
    if (env.rank == 0)
      expect_values(
          avg, 0, 3, [&](std::size_t j) { return (n - 1) + static_cast<double>(j); }, "avg");
    Buffer prod = Buffer::allocate(2, DType::Int64);
    set(prod, 0, env.rank + 1);
    set(prod, 1, -1);
    c->reduce(prod, prod, ReduceOp::Prod, n - 1, shared_memory());
    if (env.rank == n - 1) {
      double factorial = 1;
      for (int r = 1; r <= n; ++r) factorial *= r;
      expect_values(
          prod, 0, 2, [&](std::size_t j) { return j == 0 ? factorial : (n % 2 ? -1.0 : 1.0); },
          "prod");
    }
  }));
}

TEST_CASE("ranks disagreeing about whether a broadcast is eager fail naming both calls",
          "[comm][multiproc][eager]") {
  // The root broadcasts 4 floats (eager) while the others expect kSlotFloats (through slots), and
  // the other way round. The ranks that wait meet the root's announcement for this op and fail with
  // InvalidArgument at once, not at the deadline; the root, which waited for nobody, fails at
  // its next op.
  const bool root_eager = GENERATE(true, false);
  const int size = GENERATE(2, 3);
  CAPTURE(root_eager, size);
  REQUIRE_NOTHROW(run_ranks(
      size,
      [root_eager](const Environment& env) {
        ::unsetenv("COHORT_DEBUG");
        ScopedEnv shm("COHORT_SHARED_MEMORY", "auto");
        auto c = world(env);
        c->barrier();
        const bool eager = (env.rank == 0) == root_eager;
        Buffer b = Buffer::allocate(eager ? 4 : kSlotFloats, DType::Float32);
        CollectiveOptions options = shared_memory();
        options.timeout =
            120s;  // far beyond the test's own limit: failing at the deadline fails it
        if (env.rank != 0) {
          expect_error([&] { c->broadcast(b, 0, options); }, ErrorCode::InvalidArgument,
                       {"broadcast of 16 bytes",
                        "broadcast of " + std::to_string(4 * kSlotFloats) + " bytes"},
                       "non-root");
        } else {
          bool failed = false;
          try {
            c->broadcast(b, 0, options);
            c->barrier(options);
          } catch (const Error& e) {
            failed = true;
            RANK_CHECK(
                e.code() == ErrorCode::InvalidArgument || e.code() == ErrorCode::InvalidUsage,
                "root: " << e.what());
          }
          RANK_CHECK(failed, "the root went on as if the ranks agreed");
        }
      },
      60s));
}

TEST_CASE("a tiny broadcast made by the root one op later than by the others fails",
          "[comm][multiproc][eager]") {
  // The root broadcasts kSlotFloats floats (through a slot: a single-piece root waits for nobody),
  // then 4 floats twice (eager, nor do these wait); the others start once it is done (a store key)
  // and call only the 4-float broadcast. The root's eager line then holds a broadcast of 16
  // bytes, as they expect, but made one op later than theirs, and its Arrived line for their
  // op's generation already holds its second tiny broadcast's, which says nothing about theirs.
  // A reader that trusted the eager line's announcement would take the root's values and
  // return; the line also carries the op's generation, which differs, so it fails naming the
  // disagreement.
  const int size = GENERATE(2, 3);
  CAPTURE(size);
  REQUIRE_NOTHROW(run_ranks(
      size,
      [](const Environment& env) {
        ::unsetenv("COHORT_DEBUG");
        ScopedEnv shm("COHORT_SHARED_MEMORY", "auto");
        auto c = world(env);
        const std::shared_ptr<Store> store = connect_store(env);
        c->barrier();
        CollectiveOptions options = shared_memory();
        options.timeout =
            120s;  // far beyond the test's own limit: failing at the deadline fails it
        Buffer tiny = Buffer::allocate(4, DType::Float32);
        if (env.rank != 0) {
          store->get_string("eager/root_ahead", 60s);
          expect_error([&] { c->broadcast(tiny, 0, options); }, ErrorCode::InvalidArgument,
                       {"ranks disagree", "broadcast of 16 bytes", "after other ops"}, "non-root");
        } else {
          Buffer large = Buffer::allocate(kSlotFloats, DType::Float32);
          c->broadcast(large, 0, options);
          c->broadcast(tiny, 0, options);
          c->broadcast(tiny, 0, options);
          store->set_string("eager/root_ahead", "1");
          bool failed = false;
          try {
            c->barrier(options);
          } catch (const Error& e) {
            failed = true;
            RANK_CHECK(e.code() == ErrorCode::InvalidArgument, "root: " << e.what());
          }
          RANK_CHECK(failed, "the root went on as if the ranks agreed");
        }
      },
      60s));
}
