// The shared arena with real processes (cohort::launch) and a real TCP store: every rank agrees
// on whether it exists (including when one rank opts out), every rank sees every other rank's
// slots and flags, and waits fail with Timeout or RemoteError naming the missing rank instead of
// hanging. Checks run inside the ranks; a failed check throws, which fails the launch.

#include "transport/shared_arena.hpp"
#include "core/tunables.hpp"
#include "transport/transport_factory.hpp"

#include <cohort/error.hpp>
#include <cohort/launch.hpp>
#include <cohort/store.hpp>

#include "rank_helpers.hpp"
#include "support/cross_process_reads.hpp"

#include <catch2/catch.hpp>

#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using cohort::transport::Deadline;
using cohort::transport::SharedArena;
using namespace std::chrono_literals;

using cohort::test::after;
using cohort::test::bounded;
using cohort::test::expect;
using cohort::test::open_store;

/// An arena set up through a transport of its own (built through `store` under `prefix`).
std::unique_ptr<SharedArena> open_arena(cohort::Store& store, const cohort::Environment& env,
                                        const std::string& prefix = "a") {
  cohort::transport::TransportOptions options;
  options.local_world_size = env.local_world_size;
  auto transport =
      cohort::transport::create_transport(store, prefix, env.rank, env.world_size, options);
  return SharedArena::create(*transport, cohort::transport::op_tag(1, 0, 0), env.local_world_size,
                             std::chrono::steady_clock::now() + 30s, "arena test");
}

}  // namespace

TEST_CASE("every rank sees every rank's slots, inline bytes and flags", "[arena][multiproc]") {
  const int world = GENERATE(2, 3, 4, 5);
  CAPTURE(world);
  REQUIRE_NOTHROW(cohort::launch(
      world,
      [](const cohort::Environment& env) {
        auto store = open_store(env);
        auto arena = open_arena(*store, env);
        expect(arena != nullptr, "no arena among ranks of one host");
        expect(arena->rank() == env.rank && arena->size() == env.world_size, "rank/size");
        // Several generations, so both slot parities and the flag lines of each are used and
        // reused; each rank writes a pattern naming (rank, generation) and checks everyone's.
        for (int round = 0; round < 6; ++round) {
          const std::uint64_t g = arena->next_generation();
          expect(g == static_cast<std::uint64_t>(round + 1), "generations count from 1 alike");
          auto pattern = [&](int r, std::size_t i) {
            return static_cast<std::byte>((r * 31 + static_cast<int>(g) * 7 + i) & 0xff);
          };
          std::byte* mine = arena->data(env.rank, g);
          for (std::size_t i = 0; i < SharedArena::kSlotBytes; i += 4093)
            mine[i] = pattern(env.rank, i);
          mine[SharedArena::kSlotBytes - 1] = pattern(env.rank, SharedArena::kSlotBytes - 1);
          std::byte* small = arena->inline_data(env.rank, g);
          for (std::size_t i = 0; i < SharedArena::kInlineBytes; ++i)
            small[i] = pattern(env.rank, i);
          arena->publish(SharedArena::Flag::Arrived, g);
          arena->wait_for_all(SharedArena::Flag::Arrived, g, after(20s), "round");
          for (int r = 0; r < env.world_size; ++r) {
            const std::byte* theirs = arena->data(r, g);
            for (std::size_t i = 0; i < SharedArena::kSlotBytes; i += 4093)
              expect(theirs[i] == pattern(r, i), "data slot of rank " + std::to_string(r));
            expect(theirs[SharedArena::kSlotBytes - 1] == pattern(r, SharedArena::kSlotBytes - 1),
                   "last byte of rank " + std::to_string(r));
            const std::byte* their_small = arena->inline_data(r, g);
            for (std::size_t i = 0; i < SharedArena::kInlineBytes; ++i)
              expect(their_small[i] == pattern(r, i), "inline bytes of rank " + std::to_string(r));
          }
          // A second phase on the other flag, waited for one rank at a time.
          arena->publish(SharedArena::Flag::Reduced, g);
          for (int r = 0; r < env.world_size; ++r)
            if (r != env.rank)
              arena->wait_for(r, SharedArena::Flag::Reduced, g, after(20s), "second phase");
        }
      },
      bounded()));
}

TEST_CASE("one rank opting out (COHORT_SHARED_MEMORY=off) leaves every rank without an arena",
          "[arena][multiproc]") {
  const int world = GENERATE(1, 2, 3);
  CAPTURE(world);
  REQUIRE_NOTHROW(cohort::launch(
      world,
      [](const cohort::Environment& env) {
        auto store = open_store(env);
        if (env.rank == env.world_size - 1) setenv("COHORT_SHARED_MEMORY", "off", 1);
        // Below init(), nothing re-reads the tunables: take the snapshot as init() would.
        cohort::reload_tunables();
        auto arena = open_arena(*store, env);
        expect(arena == nullptr,
               "an arena although rank " + std::to_string(env.world_size - 1) + " opted out");
        // The same ranks with everyone willing agree on having one (a world of one never has).
        unsetenv("COHORT_SHARED_MEMORY");
        cohort::reload_tunables();
        auto second = open_arena(*store, env, "b");
        expect((second != nullptr) == (env.world_size > 1), "arena presence with all willing");
      },
      bounded()));
}

TEST_CASE("a malformed COHORT_SHARED_MEMORY is an error naming the variable and value",
          "[arena][multiproc]") {
  REQUIRE_NOTHROW(cohort::launch(
      2,
      [](const cohort::Environment& env) {
        auto store = open_store(env);
        setenv("COHORT_SHARED_MEMORY", "maybe", 1);
        try {
          cohort::reload_tunables();  // what init() does, and where a malformed value fails
          open_arena(*store, env);
          throw std::runtime_error("accepted COHORT_SHARED_MEMORY=maybe");
        } catch (const cohort::Error& e) {
          expect(e.code() == cohort::ErrorCode::InvalidArgument, e.what());
          expect(std::string(e.what()).find("COHORT_SHARED_MEMORY='maybe'") != std::string::npos,
                 e.what());
        }
      },
      bounded()));
}

TEST_CASE("a silent rank: Timeout naming it and the op; a dead rank: RemoteError naming it",
          "[arena][multiproc]") {
  REQUIRE_NOTHROW(cohort::launch(
      3,
      [](const cohort::Environment& env) {
        if (env.rank == 2) {
          // Rank 2 maps the arena from a child that dies (see run_in_child_that_dies).
          cohort::test::run_in_child_that_dies([&] {
            auto store = open_store(env);
            auto arena = open_arena(*store, env);
            store->get("timed-out/0", 30s);
            store->get("timed-out/1", 30s);
          });
          return;
        }
        auto store = open_store(env);
        auto arena = open_arena(*store, env);
        expect(arena != nullptr, "arena");
        // Rank 2 is alive but never publishes: a Timeout at the deadline naming rank 2 only.
        const std::uint64_t g = arena->next_generation();
        arena->publish(SharedArena::Flag::Arrived, g);
        const auto start = std::chrono::steady_clock::now();
        try {
          arena->wait_for_all(SharedArena::Flag::Arrived, g, after(300ms), "allreduce #4");
          throw std::runtime_error("wait for a silent rank returned");
        } catch (const cohort::Error& e) {
          expect(e.code() == cohort::ErrorCode::Timeout, std::string("code: ") + e.what());
          expect(e.message().find("allreduce #4") != std::string::npos, e.what());
          expect(e.message().find("rank 2") != std::string::npos, e.what());
          expect(e.message().find("rank 0") == std::string::npos &&
                     e.message().find("rank 1") == std::string::npos,
                 std::string("names only the silent rank: ") + e.what());
        }
        expect(std::chrono::steady_clock::now() - start < 10s, "timeout honoured");
        store->set("timed-out/" + std::to_string(env.rank), {1});
        // Now rank 2 dies: the next wait fails as RemoteError naming it, long before its deadline.
        const auto again = std::chrono::steady_clock::now();
        try {
          arena->wait_for(2, SharedArena::Flag::Arrived, g, after(60s), "barrier #5");
          throw std::runtime_error("wait for a dead rank returned");
        } catch (const cohort::Error& e) {
          expect(e.code() == cohort::ErrorCode::RemoteError, std::string("code: ") + e.what());
          expect(e.message().find("barrier #5") != std::string::npos, e.what());
          expect(e.message().find("rank 2") != std::string::npos, e.what());
        }
        expect(std::chrono::steady_clock::now() - again < 30s, "death noticed before the deadline");
      },
      bounded()));
}

namespace {

/// A rank's buffer of `bytes` filled with a byte naming the rank, its pid and address in the
/// store under `prefix`.
std::vector<unsigned char> publish_buffer(cohort::Store& store, const cohort::Environment& env,
                                          const std::string& prefix, std::size_t bytes) {
  std::vector<unsigned char> buffer(bytes, static_cast<unsigned char>(0x40 + env.rank));
  store.set_string(prefix + "/pid/" + std::to_string(env.rank), std::to_string(getpid()));
  store.set_string(prefix + "/at/" + std::to_string(env.rank),
                   std::to_string(reinterpret_cast<std::uintptr_t>(buffer.data())));
  return buffer;
}

}  // namespace

TEST_CASE(
    "single copy: the arena's verdict matches the kernel's, and read_from copies peers' "
    "buffers",
    "[arena][multiproc]") {
  const int world = GENERATE(2, 3, 5);
  CAPTURE(world);
  REQUIRE_NOTHROW(cohort::launch(
      world,
      [](const cohort::Environment& env) {
        unsetenv("COHORT_SINGLE_COPY");  // the verdict compared below is the kernel's alone
        cohort::reload_tunables();
        auto store = open_store(env);
        // Many pages and an odd length, on pages of the vector's own (small ones here).
        constexpr std::size_t kBytes = 3 * 1024 * 1024 + 5;
        const std::vector<unsigned char> mine = publish_buffer(*store, env, "sc", kBytes);
        cohort::test::barrier(*store, "sc/published", env.rank, env.world_size);
        bool everyone_readable = true;
        std::vector<pid_t> pids(static_cast<std::size_t>(env.world_size));
        std::vector<std::uint64_t> addresses(pids.size());
        for (int r = 0; r < env.world_size; ++r) {
          const std::string who = std::to_string(r);
          pids[static_cast<std::size_t>(r)] =
              static_cast<pid_t>(std::stol(store->get_string("sc/pid/" + who, 30s)));
          addresses[static_cast<std::size_t>(r)] =
              std::stoull(store->get_string("sc/at/" + who, 30s));
        }
        bool readable = true;
        for (int r = 0; r < env.world_size; ++r)
          if (r != env.rank)
            readable =
                readable && cohort::test::reads_only(pids[static_cast<std::size_t>(r)],
                                                     addresses[static_cast<std::size_t>(r)], 64,
                                                     static_cast<unsigned char>(0x40 + r));
        store->set_string("sc/readable/" + std::to_string(env.rank), readable ? "1" : "0");
        for (int r = 0; r < env.world_size; ++r)
          everyone_readable = everyone_readable &&
                              store->get_string("sc/readable/" + std::to_string(r), 30s) == "1";

        auto arena = open_arena(*store, env);
        expect(arena != nullptr, "arena");
        expect(arena->single_copy() == everyone_readable,
               std::string("arena says single copy ") + (arena->single_copy() ? "works" : "fails") +
                   ", the kernel's own answer is the opposite");
        if (!arena->single_copy()) return;  // nothing more to check where the kernel refuses

        for (int r = 0; r < env.world_size; ++r) {
          if (r == env.rank) continue;
          std::vector<unsigned char> copy(kBytes, 0);
          arena->read_from(r, copy.data(),
                           reinterpret_cast<const void*>(addresses[static_cast<std::size_t>(r)]),
                           kBytes, "read test");
          const auto wrong = std::find_if(copy.begin(), copy.end(), [&](unsigned char c) {
            return c != static_cast<unsigned char>(0x40 + r);
          });
          expect(wrong == copy.end(), "byte " + std::to_string(wrong - copy.begin()) + " of rank " +
                                          std::to_string(r) + "'s buffer");
        }
        // An address the peer never mapped: SystemError naming the rank and the op, not a crash.
        const int peer = (env.rank + 1) % env.world_size;
        unsigned char byte = 0;
        try {
          arena->read_from(peer, &byte, reinterpret_cast<const void*>(std::uintptr_t{8}), 1,
                           "gather #9");
          throw std::runtime_error("read_from an unmapped address returned");
        } catch (const cohort::Error& e) {
          expect(e.code() == cohort::ErrorCode::SystemError, std::string("code: ") + e.what());
          expect(e.message().find("rank " + std::to_string(peer)) != std::string::npos, e.what());
          expect(e.message().find("gather #9") != std::string::npos, e.what());
        }
        // Nobody frees its buffer while another rank may still read it.
        cohort::test::barrier(*store, "sc/read", env.rank, env.world_size);
      },
      bounded()));
}

TEST_CASE(
    "one rank with COHORT_SINGLE_COPY=off: every rank keeps the arena, none copies "
    "directly",
    "[arena][multiproc]") {
  const int world = GENERATE(2, 3);
  CAPTURE(world);
  REQUIRE_NOTHROW(cohort::launch(
      world,
      [](const cohort::Environment& env) {
        auto store = open_store(env);
        if (env.rank == 0) setenv("COHORT_SINGLE_COPY", "off", 1);
        cohort::reload_tunables();
        auto arena = open_arena(*store, env);
        expect(arena != nullptr, "the arena itself stays");
        expect(!arena->single_copy(), "single copy although rank 0 opted out");
        unsetenv("COHORT_SINGLE_COPY");
        cohort::reload_tunables();
      },
      bounded()));
}

TEST_CASE("mark_failed: peers waiting on the rank fail at once, as a failure or a disagreement",
          "[arena][multiproc]") {
  const bool disagreement = GENERATE(false, true);
  CAPTURE(disagreement);
  REQUIRE_NOTHROW(cohort::launch(
      3,
      [disagreement](const cohort::Environment& env) {
        auto store = open_store(env);
        auto arena = open_arena(*store, env);
        expect(arena != nullptr, "arena");
        arena->begin_op(42, nullptr);
        const std::uint64_t g = arena->next_generation();
        if (env.rank == 1) {
          arena->mark_failed(disagreement);  // instead of announcing g
          return;
        }
        arena->publish(SharedArena::Flag::Arrived, g);
        const auto start = std::chrono::steady_clock::now();
        try {
          // Rank 1 itself (a wait for every rank may meet another's knock-on mark first).
          arena->wait_for(1, SharedArena::Flag::Arrived, g, after(60s), "scatter #3");
          throw std::runtime_error("a wait for a rank that failed returned");
        } catch (const cohort::Error& e) {
          const auto expected =
              disagreement ? cohort::ErrorCode::InvalidArgument : cohort::ErrorCode::RemoteError;
          expect(e.code() == expected, std::string("code: ") + e.what());
          expect(e.message().find("rank 1") != std::string::npos, e.what());
          expect(e.message().find(disagreement ? "disagree" : "failed") != std::string::npos,
                 e.what());
          expect(e.message().find("scatter #3") != std::string::npos, e.what());
        }
        expect(std::chrono::steady_clock::now() - start < 30s, "failed before the deadline");
      },
      bounded()));
}

TEST_CASE(
    "wait_for_one_of: the others learn which accepted announcement rank 0 made; any other is a "
    "disagreement on every rank",
    "[arena][multiproc]") {
  const int world = GENERATE(2, 3, 5);
  CAPTURE(world);
  REQUIRE_NOTHROW(cohort::launch(
      world,
      [](const cohort::Environment& env) {
        auto store = open_store(env);
        auto arena = open_arena(*store, env);
        expect(arena != nullptr, "arena");
        const std::vector<std::uint64_t> accepted{100, 101, 102};
        // Step 1: rank 0 announces the second accepted value; the others start from the first.
        arena->begin_op(env.rank == 0 ? 101 : 100, nullptr);
        const std::uint64_t g = arena->next_generation();
        if (env.rank == 0) {
          arena->publish(SharedArena::Flag::Arrived, g);
        } else {
          const std::uint64_t theirs = arena->wait_for_one_of(0, g, accepted, after(30s), "peek");
          expect(theirs == 101, "learned " + std::to_string(theirs) + ", rank 0 announced 101");
          arena->begin_op(theirs, nullptr);
          arena->publish(SharedArena::Flag::Arrived, g);
        }
        // Everyone now announces 101 for the step: no wait finds a disagreement.
        arena->wait_for_all(SharedArena::Flag::Arrived, g, after(30s), "step 1");

        // Step 2: rank 0 announces a value nobody accepts.
        arena->begin_op(env.rank == 0 ? 999 : 100, nullptr);
        const std::uint64_t g2 = arena->next_generation();
        const auto start = std::chrono::steady_clock::now();
        try {
          if (env.rank == 0) {
            arena->publish(SharedArena::Flag::Arrived, g2);
            // Rank 1 found the disagreement and marked its flags instead of announcing g2.
            arena->wait_for(1, SharedArena::Flag::Arrived, g2, after(60s), "gather #4");
          } else {
            arena->wait_for_one_of(0, g2, accepted, after(60s), "broadcast #7");
          }
          throw std::runtime_error("an announcement nobody accepts passed");
        } catch (const cohort::Error& e) {
          expect(e.code() == cohort::ErrorCode::InvalidArgument, std::string("code: ") + e.what());
          expect(e.message().find("disagree") != std::string::npos, e.what());
          if (env.rank != 0) {
            // "rank 0 called 999", or, where rank 0's mark came first (it met rank 1's), "rank 0
            // found that the ranks disagree about this op (it called 999; ...)".
            expect(e.message().find("rank 0") != std::string::npos, e.what());
            expect(e.message().find("called 999") != std::string::npos, e.what());
            expect(e.message().find("broadcast #7") != std::string::npos, e.what());
          } else {
            expect(e.message().find("rank 1") != std::string::npos, e.what());
          }
        }
        expect(std::chrono::steady_clock::now() - start < 30s, "failed before the deadline");
      },
      bounded()));
}
