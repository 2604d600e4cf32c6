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

#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

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
