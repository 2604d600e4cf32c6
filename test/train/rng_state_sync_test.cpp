// set_seed and RngStateSync on real processes: Accelerate's seeding rule, TRAINING.md's state
// broadcast case, every root of worlds of 1, 2, 3 and 5, and every failure thrown on every rank
// (registration mismatches, a root whose getter throws, a setter that throws), each followed by a
// successful synchronize to show the ranks stayed in step. Expected states are written from each
// rank's known inputs, never read back through the code under test.

#include "comm/rank_checks.hpp"

#include <cohort/train/random.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using namespace cohort;
using namespace cohort::test;
using cohort::train::RngStateSync;
using cohort::train::set_seed;

std::vector<std::byte> bytes(std::size_t n, int value) {
  return std::vector<std::byte>(n, static_cast<std::byte>(value));
}

// n bytes that differ from rank to rank and from position to position.
std::vector<std::byte> pattern(std::size_t n, int rank) {
  std::vector<std::byte> out(n);
  for (std::size_t i = 0; i < n; ++i) {
    out[i] = static_cast<std::byte>((i * 31 + static_cast<std::size_t>(rank) * 7 + 1) % 251);
  }
  return out;
}

std::string show(const std::vector<std::byte>& state) {
  std::ostringstream out;
  out << state.size() << " bytes [";
  for (std::size_t i = 0; i < std::min<std::size_t>(state.size(), 8); ++i) {
    out << (i ? " " : "") << std::hex << static_cast<int>(state[i]);
  }
  out << (state.size() > 8 ? " ...]" : "]");
  return out.str();
}

// An engine's generator as RngStateSync sees it: a byte state, plus a count of the reads and
// writes cohort made and a log of the setters' order shared by a rank's generators.
struct ByteGenerator {
  std::vector<std::byte> state;
  int gets = 0;
  int sets = 0;
};

using Generators = std::map<std::string, ByteGenerator>;  // node-based: entries never move

void attach(RngStateSync& sync, Generators& generators, const std::string& name,
            std::vector<std::string>* set_order = nullptr) {
  ByteGenerator& g = generators[name];
  sync.add(
      name,
      [&g] {
        ++g.gets;
        return g.state;
      },
      [&g, name, set_order](std::span<const std::byte> state) {
        ++g.sets;
        g.state.assign(state.begin(), state.end());
        if (set_order) set_order->push_back(name);
      });
}

void expect_state(const Generators& generators, const std::string& name,
                  const std::vector<std::byte>& want, const std::string& where) {
  const std::vector<std::byte>& got = generators.at(name).state;
  RANK_CHECK(got == want,
             where << ": '" << name << "' is " << show(got) << ", expected " << show(want));
}

void expect_counts(const Generators& generators, const std::string& name, int gets, int sets,
                   const std::string& where) {
  const ByteGenerator& g = generators.at(name);
  RANK_CHECK(g.gets == gets && g.sets == sets,
             where << ": '" << name << "' was read " << g.gets << " and written " << g.sets
                   << " times, expected " << gets << " and " << sets);
}

// A synchronize that must succeed, on fresh generators: proves the ranks are in step after an
// error (a rank left behind in an earlier exchange would mismatch or hang here).
void expect_in_step(Communicator& comm, const std::string& where) {
  Generators generators;
  RngStateSync sync;
  attach(sync, generators, "x");
  generators["x"].state = bytes(3, comm.rank() + 1);
  sync.synchronize(comm, {}, comm.size() - 1);
  expect_state(generators, "x", bytes(3, comm.size()), where + ", then a good synchronize");
}

TEST_CASE("set_seed: 42 on 4 ranks is 42..45 device-specific, else 42 everywhere",
          "[train][random][multiproc]") {
  REQUIRE_NOTHROW(run_ranks(4, [](const Environment& env) {
    auto comm = world(env);
    const std::uint64_t r = static_cast<std::uint64_t>(comm->rank());

    std::vector<std::uint64_t> applied;
    const auto apply = [&](std::uint64_t s) { applied.push_back(s); };
    const std::uint64_t specific = set_seed(*comm, 42, true, apply);
    RANK_CHECK(specific == 42 + r, "device-specific seed " << specific);
    RANK_CHECK(applied == std::vector<std::uint64_t>{42 + r}, "apply ran " << applied.size());
    const std::uint64_t shared = set_seed(*comm, 42, false);
    RANK_CHECK(shared == 42, "shared seed " << shared);
    // seed + rank wraps modulo 2^64.
    const std::uint64_t wrapped = set_seed(*comm, ~0ull, true);
    RANK_CHECK(wrapped == r - 1, "wrapped seed " << wrapped);

    // The step random.hpp describes, with a real generator whose state is its text form: seeded
    // per rank, then synchronized from rank 0, every rank draws what mt19937_64(42) draws.
    std::mt19937_64 engine;
    set_seed(*comm, 42, true, [&](std::uint64_t s) { engine.seed(s); });
    RngStateSync sync;
    sync.add(
        "mt19937_64",
        [&] {
          std::ostringstream text;
          text << engine;
          const std::string s = text.str();
          const auto* first = reinterpret_cast<const std::byte*>(s.data());
          return std::vector<std::byte>(first, first + s.size());
        },
        [&](std::span<const std::byte> state) {
          std::istringstream text(
              std::string(reinterpret_cast<const char*>(state.data()), state.size()));
          text >> engine;
          if (!text) throw std::runtime_error("mt19937_64: unreadable state");
        });
    sync.synchronize(*comm, {"mt19937_64"});
    std::mt19937_64 reference(42);
    for (int i = 0; i < 5; ++i) {
      const std::uint64_t got = engine(), want = reference();
      RANK_CHECK(got == want,
                 "draw " << i << " after synchronize is " << got << ", expected " << want);
    }
  }));
}

TEST_CASE("TRAINING.md: 3 ranks, 'a' = 16 bytes of r, 'b' = r+1 bytes of 0xEE",
          "[train][random][multiproc]") {
  REQUIRE_NOTHROW(run_ranks(3, [](const Environment& env) {
    auto comm = world(env);
    const int r = comm->rank();
    Generators generators;
    RngStateSync sync;
    attach(sync, generators, "a");
    attach(sync, generators, "b");
    generators["a"].state = bytes(16, r);
    generators["b"].state = bytes(static_cast<std::size_t>(r) + 1, 0xEE);

    sync.synchronize(*comm);
    expect_state(generators, "a", bytes(16, 0x00), "every name");
    expect_state(generators, "b", bytes(1, 0xEE), "every name");
    expect_counts(generators, "a", r == 0 ? 1 : 0, 1, "every name");
    expect_counts(generators, "b", r == 0 ? 1 : 0, 1, "every name");

    // Only "a": "b" keeps each rank's own state and is neither read nor written.
    generators["a"].state = bytes(16, 0x10 + r);
    generators["b"].state = bytes(2, 0x20 + r);
    sync.synchronize(*comm, {"a"});
    expect_state(generators, "a", bytes(16, 0x10), "['a']");
    expect_state(generators, "b", bytes(2, 0x20 + r), "['a']");
    expect_counts(generators, "a", r == 0 ? 2 : 0, 2, "['a']");
    expect_counts(generators, "b", r == 0 ? 1 : 0, 1, "['a']");
  }));
}

TEST_CASE("every root of worlds of 1, 2, 3 and 5, with empty, tiny and large states",
          "[train][random][multiproc]") {
  const int size = GENERATE(1, 2, 3, 5);
  REQUIRE_NOTHROW(run_ranks(size, [](const Environment& env) {
    auto comm = world(env);
    const int r = comm->rank();
    const std::vector<std::string> names = {"empty", "one", "a", "large"};
    for (int root = 0; root < comm->size(); ++root) {
      const std::string where = "root " + std::to_string(root);
      Generators generators;
      RngStateSync sync;
      std::vector<std::string> set_order;
      for (const std::string& name : names) attach(sync, generators, name, &set_order);
      // Every rank's states differ from every other rank's, so a state from the wrong rank shows.
      generators["empty"].state = {};
      generators["one"].state = bytes(1, r);
      generators["a"].state = bytes(16, 0x30 + r);
      generators["large"].state = pattern(100003, r);

      // The same names, each rank listing them in its own order: the root's order is used.
      std::vector<std::string> request = names;
      std::rotate(request.begin(), request.begin() + r % 4, request.end());
      sync.synchronize(*comm, request, root);

      expect_state(generators, "empty", {}, where);
      expect_state(generators, "one", bytes(1, root), where);
      expect_state(generators, "a", bytes(16, 0x30 + root), where);
      expect_state(generators, "large", pattern(100003, root), where);
      for (const std::string& name : names) {
        expect_counts(generators, name, r == root ? 1 : 0, 1, where);
      }
      std::vector<std::string> root_order = names;
      std::rotate(root_order.begin(), root_order.begin() + root % 4, root_order.end());
      RANK_CHECK(set_order == root_order,
                 where << ": setters ran in another order than " << root_order.front() << ", ...");
    }
  }));
}

// One rank's generators and request for a mismatch scenario.
struct Registration {
  std::vector<std::string> registered;
  std::vector<std::string> request;  // empty: every registered name
};

// Runs synchronize with `mine`, requires InvalidArgument containing `needles` on this rank, no
// setter run and no state changed, and then a good synchronize.
void expect_mismatch(Communicator& comm, const Registration& mine, int root,
                     std::initializer_list<std::string_view> needles, const std::string& where) {
  Generators generators;
  RngStateSync sync;
  for (const std::string& name : mine.registered) {
    attach(sync, generators, name);
    generators[name].state = bytes(4, comm.rank());
  }
  expect_error([&] { sync.synchronize(comm, mine.request, root); }, ErrorCode::InvalidArgument,
               needles, where.c_str());
  for (const std::string& name : mine.registered) {
    RANK_CHECK(generators[name].sets == 0, where << ": setter of '" << name << "' ran");
    expect_state(generators, name, bytes(4, comm.rank()), where);
  }
  expect_in_step(comm, where);
}

TEST_CASE("a registration mismatch throws InvalidArgument on every rank, before any setter",
          "[train][random][multiproc]") {
  const int size = GENERATE(2, 3, 5);
  REQUIRE_NOTHROW(run_ranks(size, [](const Environment& env) {
    auto comm = world(env);
    const int r = comm->rank();
    const int last = comm->size() - 1;
    const std::string last_name = "rank " + std::to_string(last);
    const Registration both{{"a", "b"}, {"a", "b"}};

    expect_mismatch(*comm, r == last ? Registration{{"a"}, {"a", "b"}} : both, 0,
                    {"root 0 asked for ['a', 'b']", last_name + " has no generator ['b']"},
                    "the last rank lacks 'b'");
    expect_mismatch(*comm, r == 1 ? Registration{{"a", "b"}, {"a"}} : both, 0,
                    {"root 0 asked for ['a', 'b']", "rank 1 asked for ['a']"},
                    "rank 1 asks for other names");
    // The root itself lacks a name: it reads nothing and is named like any other rank.
    expect_mismatch(*comm, r == 1 ? Registration{{"a"}, {"a", "b"}} : both, 1,
                    {"root 1 asked for ['a', 'b']", "rank 1 has no generator ['b']"},
                    "root 1 lacks 'b'");
    // Every registered name (an empty request), one rank having registered one more.
    expect_mismatch(*comm, r == last ? Registration{{"a", "b", "c"}, {}} : Registration{{"a", "b"}},
                    0, {last_name + " asked for ['a', 'b', 'c']"},
                    "the last rank registered 'c' too");
    expect_mismatch(*comm, r == 1 ? Registration{{"a", "b"}, {"a", "b", "a"}} : both, 0,
                    {"rank 1 names 'a' twice"}, "rank 1 names 'a' twice");
    if (comm->size() >= 3) {
      // Two ranks at fault: both are named, on every rank.
      const Registration mine = r == 1   ? Registration{{"b"}, {"a", "b"}}
                                : r == 2 ? Registration{{"a"}, {"a", "b"}}
                                         : both;
      expect_mismatch(*comm, mine, 0,
                      {"rank 1 has no generator ['a']", "rank 2 has no generator ['b']"},
                      "ranks 1 and 2 lack names");
    }
  }));
}

TEST_CASE("a getter that throws on the root fails every rank, none hangs",
          "[train][random][multiproc]") {
  const int size = GENERATE(1, 2, 3);
  REQUIRE_NOTHROW(run_ranks(size, [](const Environment& env) {
    auto comm = world(env);
    const int r = comm->rank();
    const int root = comm->size() - 1;
    Generators generators;
    RngStateSync sync;
    attach(sync, generators, "a");
    sync.add(
        "b", [&]() -> std::vector<std::byte> { throw std::runtime_error("entropy pool empty"); },
        [&](std::span<const std::byte>) { ++generators["b"].sets; });
    generators["a"].state = bytes(8, r);

    if (r == root) {
      // The root gets its getter's own exception back.
      bool thrown = false;
      try {
        sync.synchronize(*comm, {"a", "b"}, root);
      } catch (const std::runtime_error& e) {
        thrown = dynamic_cast<const Error*>(&e) == nullptr &&
                 std::string(e.what()) == "entropy pool empty";
        RANK_CHECK(thrown, "root threw " << e.what());
      }
      RANK_CHECK(thrown, "no error on the root");
    } else {
      expect_error(
          [&] {
            sync.synchronize(*comm, {"a", "b"}, root);
          },
          ErrorCode::RemoteError, {"root " + std::to_string(root), "'b'", "entropy pool empty"},
          "getter threw on the root");
    }
    expect_counts(generators, "a", r == root ? 1 : 0, 0, "getter threw on the root");
    RANK_CHECK(generators["b"].sets == 0, "setter of 'b' ran");
    expect_state(generators, "a", bytes(8, r), "getter threw on the root");
    expect_in_step(*comm, "getter threw on the root");
  }));
}

TEST_CASE("a setter that throws fails its rank with its error and the others with its rank",
          "[train][random][multiproc]") {
  const int size = GENERATE(1, 3);
  REQUIRE_NOTHROW(run_ranks(size, [](const Environment& env) {
    auto comm = world(env);
    const int r = comm->rank();
    const int failing = comm->size() - 1;
    Generators generators;
    RngStateSync sync;
    attach(sync, generators, "a");
    sync.add(
        "b", [] { return bytes(2, 0xB0); },
        [&](std::span<const std::byte>) {
          if (r == failing) throw std::runtime_error("device lost");
        });
    generators["a"].state = bytes(8, r);

    if (r == failing) {
      bool thrown = false;
      try {
        sync.synchronize(*comm, {"a", "b"});
      } catch (const std::runtime_error& e) {
        thrown = std::string(e.what()) == "device lost";
        RANK_CHECK(thrown, "failing rank threw " << e.what());
      }
      RANK_CHECK(thrown, "no error on the failing rank");
    } else {
      expect_error(
          [&] {
            sync.synchronize(*comm, {"a", "b"});
          },
          ErrorCode::RemoteError, {"setter", "rank(s) " + std::to_string(failing)}, "setter threw");
    }
    // 'a' was installed everywhere before 'b' failed.
    expect_state(generators, "a", bytes(8, 0), "setter threw");
    expect_in_step(*comm, "setter threw");
  }));
}

TEST_CASE("a root out of range throws InvalidArgument without communicating",
          "[train][random][multiproc]") {
  REQUIRE_NOTHROW(run_ranks(2, [](const Environment& env) {
    auto comm = world(env);
    Generators generators;
    RngStateSync sync;
    attach(sync, generators, "a");
    for (int root : {-1, 2}) {
      expect_error([&] { sync.synchronize(*comm, {}, root); }, ErrorCode::InvalidArgument,
                   {"root " + std::to_string(root), "world of 2"}, "root out of range");
    }
    RANK_CHECK(generators["a"].gets == 0 && generators["a"].sets == 0, "a generator was used");
    expect_in_step(*comm, "root out of range");
  }));
}

TEST_CASE("RngStateSync's registry: add, replace, remove, names", "[train][random]") {
  RngStateSync sync;
  const auto get = [] { return std::vector<std::byte>{}; };
  const auto set = [](std::span<const std::byte>) {};
  sync.add("torch_cuda", get, set);
  sync.add("torch_cpu", get, set);
  sync.add("torch_cpu", get, set);  // replaces
  CHECK(sync.names() == std::vector<std::string>{"torch_cpu", "torch_cuda"});
  sync.remove("torch_cuda");
  CHECK(sync.names() == std::vector<std::string>{"torch_cpu"});

  const auto code_and_text = [](const std::function<void()>& fn, const std::string& text) {
    try {
      fn();
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::InvalidArgument);
      CHECK_THAT(e.message(), Catch::Contains(text));
      return;
    }
    FAIL("no error for " << text);
  };
  code_and_text([&] { sync.add("", get, set); }, "name is empty");
  code_and_text([&] { sync.add("numpy", {}, set); }, "'numpy' has an empty getter");
  code_and_text([&] { sync.add("numpy", get, {}); }, "'numpy' has an empty setter");
  code_and_text([&] { sync.remove("torch_xla"); }, "no generator 'torch_xla'");
  CHECK(sync.names() == std::vector<std::string>{"torch_cpu"});
}

}  // namespace
