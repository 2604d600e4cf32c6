// coordination.hpp on real processes (worlds of 1-5): process info, named barriers and their
// timeouts, main_first's order and its failure reporting (Global and per node), on_main, the
// stop trigger (TRAINING.md's cases), and print / print_all on a caller's stream.
//
// Order is observed through the launcher's store: store->add() is an atomic counter shared by
// every rank, so the ticket a rank draws inside fn says whether it ran before or after the others,
// without sleeps. Nodes are simulated by giving each rank an Environment whose local_rank is
// rank % 2 (nodes of two ranks), which is all Scope::Local reads.

#include "train_test_support.hpp"

#include <cohort/store.hpp>
#include <cohort/train/coordination.hpp>

#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>

namespace {

using namespace cohort;
using namespace cohort::test;
using namespace cohort::train;
using namespace std::chrono_literals;

// A rank's world communicator plus the store it was wired through, kept for counters.
struct Rank {
  std::shared_ptr<Store> store;
  std::shared_ptr<Communicator> comm;
};

Rank join(const Environment& env, const CommunicatorOptions& options = {}) {
  auto store = connect_store(env);
  auto comm = Communicator::create(env, store, options);
  return {store, comm};
}

// The same process placed on nodes of two ranks: local ranks 0, 1, 0, 1, 0 for ranks 0..4.
Environment on_nodes_of_two(Environment env) {
  env.local_rank = env.rank % 2;
  env.local_world_size = 2;
  env.node_rank = env.rank / 2;
  env.num_nodes = (env.world_size + 1) / 2;
  return env;
}

// A main_first everybody survives, rank 0 first: shows the ranks are still in step after an error.
void expect_in_step(Rank& rank, const Environment& env, const std::string& key,
                    const std::string& where) {
  std::int64_t ticket = 0;
  main_first(*rank.comm, env, [&] { ticket = rank.store->add(key, 1); }, {Scope::Global, true});
  if (rank.comm->rank() == 0) RANK_CHECK(ticket == 1, where << ": rank 0 drew " << ticket);
  RANK_CHECK(rank.store->add(key, 0) == rank.comm->size(), where << ": a rank did not run fn");
}

TEST_CASE("process info: main, local main, last, distributed, on_main",
          "[train][coordination][multiproc]") {
  const int size = GENERATE(1, 2, 3, 4, 5);
  REQUIRE_NOTHROW(run_ranks(size, [size](const Environment& env) {
    auto comm = world(env);
    const int r = comm->rank();
    RANK_CHECK(is_main(*comm) == (r == 0), "is_main on rank " << r);
    RANK_CHECK(is_last(*comm) == (r == size - 1), "is_last on rank " << r);
    RANK_CHECK(distributed(*comm) == (size > 1), "distributed in a world of " << size);
    // launch() puts every rank on one node: the local rank is the rank.
    RANK_CHECK(env.local_rank == r, "launch gave local rank " << env.local_rank);
    RANK_CHECK(is_local_main(env) == (r == 0), "is_local_main on rank " << r);
    const Environment nodes = on_nodes_of_two(env);
    RANK_CHECK(is_local_main(nodes) == (r % 2 == 0), "is_local_main on nodes of two, rank " << r);

    // on_main runs fn on the main rank(s) only and says whether it did; nobody waits.
    int runs = 0;
    const bool ran = on_main(*comm, env, [&] { ++runs; });
    RANK_CHECK(ran == (r == 0) && runs == (r == 0 ? 1 : 0), "on_main Global ran " << runs);
    runs = 0;
    const bool ran_local = on_main(
        *comm, nodes, [&] { ++runs; }, Scope::Local);
    RANK_CHECK(ran_local == (r % 2 == 0) && runs == (r % 2 == 0 ? 1 : 0),
               "on_main Local ran " << runs);
    expect_error([&] { on_main(*comm, env, {}); }, ErrorCode::InvalidArgument,
                 {"on_main", "fn is empty"}, "on_main without fn");
  }));
}

TEST_CASE("is_local_main reads the local rank", "[train][coordination]") {
  Environment env;
  env.rank = 6;
  env.local_rank = 0;
  CHECK(is_local_main(env));
  env.rank = 7;
  env.local_rank = 1;
  CHECK_FALSE(is_local_main(env));
}

TEST_CASE("named barriers pass on worlds of 1-5; a negative timeout names the barrier",
          "[train][coordination][multiproc]") {
  const int size = GENERATE(1, 2, 3, 4, 5);
  REQUIRE_NOTHROW(run_ranks(size, [](const Environment& env) {
    Rank rank = join(env);
    // Every rank counts itself in, then leaves the barrier: by then every rank has counted.
    rank.store->add("test/arrived", 1);
    barrier(*rank.comm, "after-arrival");
    RANK_CHECK(rank.store->add("test/arrived", 0) == rank.comm->size(),
               "left the barrier before every rank arrived");
    barrier(*rank.comm, "second", 30s);
    expect_error([&] { barrier(*rank.comm, "epoch-end", -5ms); }, ErrorCode::InvalidArgument,
                 {"barrier 'epoch-end'", "-5 ms"}, "negative timeout");
    barrier(*rank.comm, "after the refused one");
  }));
}

TEST_CASE("a barrier that times out names itself", "[train][coordination][multiproc]") {
  REQUIRE_NOTHROW(run_ranks(2, [](const Environment& env) {
    Rank rank = join(env);
    if (rank.comm->rank() == 0) {
      expect_error([&] { barrier(*rank.comm, "after-checkpoint", 300ms); }, ErrorCode::Timeout,
                   {"barrier 'after-checkpoint'"}, "rank 1 never arrives");
      rank.store->set_string("test/timed-out", "yes");
    } else {
      // Rank 1 skips the barrier and stays alive until rank 0 has timed out, so rank 0 sees a
      // timeout rather than a dead peer.
      rank.store->get_string("test/timed-out");
    }
  }));
}

TEST_CASE("main_first: rank 0 runs fn before every other rank",
          "[train][coordination][multiproc]") {
  const int size = GENERATE(1, 2, 3, 4, 5);
  REQUIRE_NOTHROW(run_ranks(size, [size](const Environment& env) {
    Rank rank = join(env);
    const int r = rank.comm->rank();
    for (const bool exit_barrier : {false, true}) {
      const std::string key = std::string("test/order/") + (exit_barrier ? "exit" : "plain");
      const std::string where = std::string("barrier_on_exit ") + (exit_barrier ? "on" : "off");
      int runs = 0;
      std::int64_t ticket = 0;
      MainFirstOptions options;
      options.barrier_on_exit = exit_barrier;
      main_first(
          *rank.comm, env,
          [&] {
            ++runs;
            ticket = rank.store->add(key, 1);
          },
          options);
      RANK_CHECK(runs == 1, where << ": fn ran " << runs << " times");
      if (r == 0) {
        RANK_CHECK(ticket == 1, where << ": rank 0 drew ticket " << ticket);
      } else {
        RANK_CHECK(ticket >= 2 && ticket <= size, where << ": rank " << r << " drew " << ticket);
      }
      // With the exit barrier nobody returns before every rank ran fn.
      if (exit_barrier) {
        RANK_CHECK(rank.store->add(key, 0) == size, where << ": returned before all ran fn");
      }
    }
  }));
}

TEST_CASE("main_first Local: each node's first process runs first",
          "[train][coordination][multiproc]") {
  const int size = GENERATE(1, 3, 4, 5);
  REQUIRE_NOTHROW(run_ranks(size, [size](const Environment& env) {
    Rank rank = join(env);
    const int r = rank.comm->rank();
    // Nodes of two: {0, 1}, {2, 3}, {4}; their first processes are the even ranks.
    const std::set<int> first = size == 1   ? std::set<int>{0}
                                : size == 3 ? std::set<int>{0, 2}
                                : size == 4 ? std::set<int>{0, 2}
                                            : std::set<int>{0, 2, 4};
    const auto firsts = static_cast<std::int64_t>(first.size());
    std::int64_t ticket = 0;
    MainFirstOptions options;
    options.scope = Scope::Local;
    options.barrier_on_exit = true;
    main_first(
        *rank.comm, on_nodes_of_two(env), [&] { ticket = rank.store->add("test/local", 1); },
        options);
    if (first.count(r) > 0) {
      RANK_CHECK(ticket >= 1 && ticket <= firsts, "first rank " << r << " drew " << ticket);
    } else {
      RANK_CHECK(ticket > firsts && ticket <= size, "rank " << r << " drew " << ticket);
    }
    RANK_CHECK(rank.store->add("test/local", 0) == size, "returned before every rank ran fn");

    // One real node (launch's placement): Local is rank 0 first, like Global.
    ticket = 0;
    main_first(
        *rank.comm, env, [&] { ticket = rank.store->add("test/one-node", 1); }, options);
    if (r == 0) RANK_CHECK(ticket == 1, "rank 0 drew " << ticket << " on one node");
  }));
}

TEST_CASE("main_first: a throwing first rank is RemoteError elsewhere, well within the timeout",
          "[train][coordination][multiproc]") {
  const int size = GENERATE(1, 2, 3, 5);
  REQUIRE_NOTHROW(run_ranks(size, [](const Environment& env) {
    CommunicatorOptions slow;
    slow.timeout = 60s;
    Rank rank = join(env, slow);
    const int r = rank.comm->rank();
    int runs = 0;
    const auto download = [&] {
      ++runs;
      if (r == 0) throw std::runtime_error("dataset download failed: disk full");
    };
    const auto start = std::chrono::steady_clock::now();
    if (r == 0) {
      expect_own_exception([&] { main_first(*rank.comm, env, download); },
                           "dataset download failed: disk full", "rank 0");
    } else {
      expect_error(
          [&] { main_first(*rank.comm, env, download); }, ErrorCode::RemoteError,
          {"main_first: fn threw on rank 0: dataset download failed: disk full", "did not run fn"},
          "waiting rank");
      const auto waited = std::chrono::steady_clock::now() - start;
      RANK_CHECK(waited < 30s,
                 "the error took "
                     << std::chrono::duration_cast<std::chrono::seconds>(waited).count()
                     << " s of a 60 s timeout");
    }
    RANK_CHECK(runs == (r == 0 ? 1 : 0), "fn ran " << runs << " times on rank " << r);
    expect_in_step(rank, env, "test/after-root-failure", "after rank 0 threw");
  }));
}

TEST_CASE("main_first Local: failures of first processes are named on every rank",
          "[train][coordination][multiproc]") {
  REQUIRE_NOTHROW(run_ranks(4, [](const Environment& env) {
    Rank rank = join(env);
    const int r = rank.comm->rank();
    const Environment nodes = on_nodes_of_two(env);  // first processes: ranks 0 and 2
    MainFirstOptions local;
    local.scope = Scope::Local;

    // Only rank 2 (node 1's first process) fails; rank 0's fn succeeded, and it is told too.
    int runs = 0;
    const auto fill_cache = [&] {
      ++runs;
      if (r == 2) throw std::runtime_error("node 1 cache corrupt");
    };
    if (r == 2) {
      expect_own_exception([&] { main_first(*rank.comm, nodes, fill_cache, local); },
                           "node 1 cache corrupt", "rank 2");
    } else {
      expect_error([&] { main_first(*rank.comm, nodes, fill_cache, local); },
                   ErrorCode::RemoteError, {"main_first: fn threw on rank 2: node 1 cache corrupt"},
                   "one node failed");
    }
    RANK_CHECK(runs == (r % 2 == 0 ? 1 : 0), "fn ran " << runs << " times on rank " << r);

    // Both first processes fail: both are named, in rank order.
    const auto both_fail = [&] { throw std::runtime_error("node " + std::to_string(r / 2)); };
    if (r % 2 == 0) {
      expect_own_exception([&] { main_first(*rank.comm, nodes, both_fail, local); },
                           "node " + std::to_string(r / 2), "first process");
    } else {
      expect_error([&] { main_first(*rank.comm, nodes, both_fail, local); }, ErrorCode::RemoteError,
                   {"threw on rank 0: node 0; on rank 2: node 1"}, "two nodes failed");
    }
    expect_in_step(rank, env, "test/after-node-failures", "after the nodes failed");
  }));
}

TEST_CASE("main_first: a later rank's failure is reported everywhere only with barrier_on_exit",
          "[train][coordination][multiproc]") {
  const int size = GENERATE(2, 3, 5);
  REQUIRE_NOTHROW(run_ranks(size, [](const Environment& env) {
    Rank rank = join(env);
    const int r = rank.comm->rank();
    const auto load = [&] {
      if (r == 1) throw std::runtime_error("shard 1 missing");
    };
    MainFirstOptions with_exit;
    with_exit.barrier_on_exit = true;
    if (r == 1) {
      expect_own_exception([&] { main_first(*rank.comm, env, load, with_exit); }, "shard 1 missing",
                           "rank 1, exit barrier");
      expect_own_exception([&] { main_first(*rank.comm, env, load); }, "shard 1 missing",
                           "rank 1, no exit barrier");
    } else {
      expect_error([&] { main_first(*rank.comm, env, load, with_exit); }, ErrorCode::RemoteError,
                   {"main_first: fn threw on rank 1: shard 1 missing"}, "exit barrier");
      // Without the exit barrier the others have left before rank 1's fn ran: nothing to report.
      main_first(*rank.comm, env, load);
    }
    expect_in_step(rank, env, "test/after-late-failure", "after rank 1 threw");
  }));
}

TEST_CASE("main_first: argument errors and a wait that times out",
          "[train][coordination][multiproc]") {
  REQUIRE_NOTHROW(run_ranks(2, [](const Environment& env) {
    Rank rank = join(env);
    const int r = rank.comm->rank();
    int runs = 0;
    MainFirstOptions negative;
    negative.timeout = -1ms;
    expect_error(
        [&] {
          main_first(
              *rank.comm, env, [&] { ++runs; }, negative);
        },
        ErrorCode::InvalidArgument, {"main_first", "-1 ms"}, "negative timeout");
    expect_error([&] { main_first(*rank.comm, env, {}); }, ErrorCode::InvalidArgument,
                 {"main_first", "fn is empty"}, "empty fn");
    RANK_CHECK(runs == 0, "fn ran despite a refused call");
    expect_in_step(rank, env, "test/after-refusals", "after refused calls");

    // Rank 0's fn outlasts rank 1's 300 ms wait: rank 1's Timeout says where it was waiting.
    // Rank 0's fn ends only once rank 1 has timed out; what rank 0 then sees depends on how far
    // rank 1's half of the exchange got, so only rank 1's error is checked.
    MainFirstOptions short_wait;
    short_wait.timeout = 300ms;
    if (r == 0) {
      try {
        main_first(
            *rank.comm, env, [&] { rank.store->get_string("test/rank1-timed-out"); }, short_wait);
      } catch (const Error&) {
      }
      rank.store->set_string("test/rank0-done", "yes");
    } else {
      expect_error(
          [&] {
            main_first(
                *rank.comm, env, [] {}, short_wait);
          },
          ErrorCode::Timeout, {"main_first (waiting for the first ranks' fn)"}, "rank 0 is slow");
      rank.store->set_string("test/rank1-timed-out", "yes");
      rank.store->get_string("test/rank0-done");
    }
  }));
}

TEST_CASE("Trigger: TRAINING.md's cases on 3 ranks", "[train][coordination][multiproc]") {
  REQUIRE_NOTHROW(run_ranks(3, [](const Environment& env) {
    auto comm = world(env);
    const int r = comm->rank();
    Trigger stop;

    // Only rank 2 sets: true on all three, then false on all three.
    if (r == 2) stop.set();
    RANK_CHECK(stop.is_set() == (r == 2), "is_set before the check");
    RANK_CHECK(stop.check(*comm), "first check after rank 2 set");
    RANK_CHECK(!stop.is_set(), "flag still raised after a true check");
    RANK_CHECK(!stop.check(*comm), "second check");

    // Rank 0 sets twice: one true, then false.
    if (r == 0) {
      stop.set();
      stop.set();
    }
    RANK_CHECK(stop.check(*comm), "check after rank 0 set twice");
    RANK_CHECK(!stop.check(*comm), "check after that");

    // A refused check keeps the flag: the next check still sees it.
    if (r == 1) stop.set();
    expect_error([&] { stop.check(*comm, -3ms); }, ErrorCode::InvalidArgument,
                 {"Trigger::check", "-3 ms"}, "negative timeout");
    RANK_CHECK(stop.is_set() == (r == 1), "a refused check changed the flag");
    RANK_CHECK(stop.check(*comm, 30s), "check after the refused one");
  }));
}

TEST_CASE("Trigger: any one rank stops every rank, on worlds of 1-5",
          "[train][coordination][multiproc]") {
  const int size = GENERATE(1, 2, 3, 4, 5);
  REQUIRE_NOTHROW(run_ranks(size, [](const Environment& env) {
    auto comm = world(env);
    const int r = comm->rank();
    Trigger stop;
    RANK_CHECK(!stop.check(*comm), "nobody set it");
    for (int setter = 0; setter < comm->size(); ++setter) {
      if (r == setter) stop.set();
      RANK_CHECK(stop.check(*comm), "rank " << setter << " set it");
      RANK_CHECK(!stop.check(*comm), "after rank " << setter << "'s trigger");
    }
    stop.set();  // everyone
    RANK_CHECK(stop.check(*comm), "every rank set it");
    RANK_CHECK(!stop.check(*comm), "after everyone's trigger");
  }));
}

TEST_CASE("print: once per job by default, once per node with Scope::Local",
          "[train][coordination]") {
  // TRAINING.md's trap: Accelerate's and Fabric's print go by local rank 0, once per node.
  Environment env;
  env.rank = 4;
  env.local_rank = 0;  // first process of node 1
  std::ostringstream out;
  print(env, "loss 0.25", out);  // world rank 4 is not rank 0
  CHECK(out.str().empty());
  print(env, "per node", out, Scope::Local);
  CHECK(out.str() == "per node\n");

  env.rank = 5;
  env.local_rank = 1;
  std::ostringstream quiet;
  print(env, "loss 0.25", quiet);
  print(env, "loss 0.25", quiet, Scope::Local);
  CHECK(quiet.str().empty());

  env.rank = 0;
  env.local_rank = 0;
  std::ostringstream job;
  print(env, "two\nlines", job);
  CHECK(job.str() == "two\nlines\n");
}

TEST_CASE("print_all: every line prefixed with the rank", "[train][coordination]") {
  Environment env;
  env.rank = 3;
  env.local_rank = 1;
  std::ostringstream out;
  print_all(env, "a\nb", out);
  CHECK(out.str() == "[rank 3] a\n[rank 3] b\n");
  std::ostringstream empty;
  print_all(env, "", empty);
  CHECK(empty.str() == "[rank 3] \n");
}

}  // namespace
