// The executor's claim of the drive from several threads (comm/executor.hpp): the fast path
// biased to the one thread that runs a streak of ops, revoked when another thread needs the
// drive, and never two drivers at once, whatever the mix of threads, blocking and queued ops.
// In one process over SelfTransport; each op's body looks for a second driver itself (an
// overlap of a few microseconds, the length of one body, is what a broken revocation leaves).

#include "comm/executor.hpp"
#include "core/process_fence.hpp"
#include "transport/self_transport.hpp"

#include <cohort/error.hpp>
#include <cohort/work.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace {

using cohort::Collective;
using cohort::comm::Executor;
using cohort::comm::OpInfo;
using cohort::transport::SelfTransport;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr std::uint32_t kTagId = 9;

/// Executors made while it lives earn their bias after `ops` fast ops.
class BiasAfter {
 public:
  explicit BiasAfter(std::uint32_t ops) { cohort::comm::testing::bias_after_ops(ops); }
  ~BiasAfter() { cohort::comm::testing::bias_after_ops(0); }
  BiasAfter(const BiasAfter&) = delete;
  BiasAfter& operator=(const BiasAfter&) = delete;
};

/// Whether executors here can bias their fast path (membarrier); says so when not.
bool can_bias() {
  if (cohort::process_fence_available()) return true;
  WARN("membarrier is unavailable here: executors never bias their fast path");
  return false;
}

OpInfo barrier_info() {
  return OpInfo{Collective::Barrier, cohort::Algorithm::Auto, 10s, nullptr, {}, {}};
}

/// A world of one's executor over SelfTransport, and what its ops' bodies saw: the numbers in
/// the order they ran, and drives that overlapped. Made after a test's BiasAfter.
struct Rig {
  SelfTransport transport;
  std::atomic<int> inside{0};
  std::atomic<int> overlaps{0};
  std::mutex mutex;
  std::vector<std::uint32_t> order;

  /// A body that holds the drive for about `hold`, as a small collective would.
  auto body(std::chrono::microseconds hold) {
    return [this, hold](const cohort::algorithms::OpContext& ctx) {
      if (inside.fetch_add(1) != 0) overlaps.fetch_add(1);
      const Clock::time_point until = Clock::now() + hold;
      while (Clock::now() < until) {
      }
      {
        std::lock_guard lock(mutex);
        order.push_back(ctx.seq);
      }
      inside.fetch_sub(1);
    };
  }

  /// Every number from 0 to count - 1 ran once, in increasing order.
  bool ran_in_order(std::uint32_t count) {
    std::lock_guard lock(mutex);
    if (order.size() != count) return false;
    for (std::uint32_t i = 0; i < count; ++i)
      if (order[i] != i) return false;
    return true;
  }

  // Last: destroyed first, while the queued ops' bodies may still run on what is above.
  Executor e{transport, nullptr, nullptr, 0, 1, 0, kTagId};
};

// A biased claim held before it takes its number (testing::biased_claim_hook), until another
// thread has numbered an op of its own or for 200 ms: a revoker that waits out the claim, as it
// must, lets the hold time out first.
std::atomic<bool> hold_armed{false};
std::atomic<bool> holding{false};
std::atomic<bool> other_numbered{false};

void hold_biased_claim() {
  if (!hold_armed.exchange(false)) return;  // the first claim only
  holding.store(true);
  const Clock::time_point until = Clock::now() + 200ms;
  while (!other_numbered.load() && Clock::now() < until) std::this_thread::yield();
}

}  // namespace

TEST_CASE("a revoker waits out a biased claim that has not taken its number yet",
          "[comm][executor]") {
  if (!can_bias()) return;
  const BiasAfter after(2);
  Rig rig;
  for (int i = 0; i < 4; ++i) rig.e.run(barrier_info(), rig.body(0us));
  REQUIRE(rig.e.biased());
  holding.store(false);
  other_numbered.store(false);
  hold_armed.store(true);
  cohort::comm::testing::biased_claim_hook.store(&hold_biased_claim);
  // Queued while this thread's claim is held: numbered before the claim's op, it would run
  // after it.
  std::thread other([&] {
    while (!holding.load()) std::this_thread::yield();
    cohort::Work queued = rig.e.submit(barrier_info(), rig.body(0us));
    other_numbered.store(true);
    queued.wait();
  });
  rig.e.run(barrier_info(), rig.body(0us));
  other.join();
  cohort::comm::testing::biased_claim_hook.store(nullptr);
  CHECK_FALSE(rig.e.biased());
  CHECK(rig.overlaps.load() == 0);
  CHECK(rig.ran_in_order(4 + 2));
}

TEST_CASE("the fast path is biased to the thread that ran a streak, and only ever to it",
          "[comm][executor]") {
  if (!can_bias()) return;
  const BiasAfter after(4);
  Rig rig;
  const auto run = [&] { rig.e.run(barrier_info(), rig.body(0us)); };

  for (int i = 0; i < 3; ++i) run();
  CHECK_FALSE(rig.e.biased());
  run();  // the fourth in a row
  CHECK(rig.e.biased());
  for (int i = 0; i < 10; ++i) run();
  CHECK(rig.e.biased());
  CHECK(rig.e.bias_grants() == 1);

  // Another thread's op revokes it; this thread then needs twice the streak.
  std::thread([&] { run(); }).join();
  CHECK_FALSE(rig.e.biased());
  for (int i = 0; i < 7; ++i) run();
  CHECK_FALSE(rig.e.biased());
  run();
  CHECK(rig.e.biased());
  CHECK(rig.e.bias_grants() == 2);

  // A streak of any length on another thread earns it nothing.
  std::thread([&] {
    for (int i = 0; i < 100; ++i) run();
  }).join();
  CHECK_FALSE(rig.e.biased());
  CHECK(rig.e.bias_grants() == 2);

  // Queued work revokes it too, without another thread.
  for (int i = 0; i < 32; ++i) run();
  CHECK(rig.e.biased());
  rig.e.submit(barrier_info(), rig.body(0us)).wait();
  CHECK_FALSE(rig.e.biased());

  CHECK(rig.overlaps.load() == 0);
  CHECK(rig.ran_in_order(3 + 1 + 10 + 1 + 8 + 100 + 32 + 1));
}

TEST_CASE("another thread taking the drive from a busy bias thread never drives beside it",
          "[comm][executor]") {
  if (!can_bias()) return;
  const BiasAfter after(2);
  // Fresh executors, so every round has a bias to revoke while its thread is running ops.
  for (int round = 0; round < 100; ++round) {
    CAPTURE(round);
    Rig rig;
    std::atomic<bool> stop{false};
    std::atomic<std::uint32_t> owner_ops{0};
    std::thread owner([&, round] {
      // Half the rounds long enough that the other thread mostly finds an op running, half
      // back to back, where it mostly comes between two ops (and races their claims).
      const std::chrono::microseconds hold = round % 2 == 0 ? 20us : 0us;
      while (!stop.load()) {
        rig.e.run(barrier_info(), rig.body(hold));
        owner_ops.fetch_add(1);
      }
    });
    while (!rig.e.biased()) std::this_thread::yield();
    // The other thread's ops alternate blocking and queued, each while the owner runs.
    const std::uint32_t seen = owner_ops.load();
    while (owner_ops.load() < seen + 2) std::this_thread::yield();
    if (round % 4 < 2) {
      rig.e.run(barrier_info(), rig.body(2us));
    } else {
      rig.e.submit(barrier_info(), rig.body(2us)).wait();
    }
    stop.store(true);
    owner.join();
    CHECK(rig.overlaps.load() == 0);
    CHECK(rig.ran_in_order(owner_ops.load() + 1));
  }
}

TEST_CASE("threads taking turns on one executor: one driver at a time, every op once, in order",
          "[comm][executor]") {
  const BiasAfter after(2);
  Rig rig;
  constexpr int kOwnerOps = 4000, kOtherOps = 300;
  std::thread other([&] {
    for (int i = 0; i < kOtherOps; ++i) {
      if (i % 3 == 2) {
        rig.e.submit(barrier_info(), rig.body(1us)).wait();
      } else {
        rig.e.run(barrier_info(), rig.body(1us));
      }
    }
  });
  for (int i = 0; i < kOwnerOps; ++i) rig.e.run(barrier_info(), rig.body(1us));
  other.join();
  CHECK(rig.overlaps.load() == 0);
  CHECK(rig.ran_in_order(kOwnerOps + kOtherOps));
}

TEST_CASE("three threads: a bias thread, a sharer and device ops numbered beside them",
          "[comm][executor]") {
  // Each round a fresh executor (a revocation doubles the streak the next bias needs), so
  // revocations keep coming while the bias thread runs ops with no time between them, a second
  // thread claims the shared path, and a third numbers ops run outside the executor.
  const BiasAfter after(2);
  std::uint64_t grants = 0;
  for (int round = 0; round < 50; ++round) {
    CAPTURE(round);
    Rig rig;
    std::mutex external_mutex;
    std::vector<std::uint32_t> external;
    constexpr int kOwnerOps = 300, kSharerOps = 60, kExternalOps = 20;
    std::thread sharer([&] {
      for (int i = 0; i < kSharerOps; ++i) rig.e.run(barrier_info(), rig.body(0us));
    });
    std::thread device([&] {
      for (int i = 0; i < kExternalOps; ++i) {
        const OpInfo info = barrier_info();
        const std::uint32_t seq = rig.e.begin_external(info);
        rig.e.end_external(info, seq, nullptr);
        std::lock_guard lock(external_mutex);
        external.push_back(seq);
      }
    });
    for (int i = 0; i < kOwnerOps; ++i) rig.e.run(barrier_info(), rig.body(0us));
    sharer.join();
    device.join();
    CHECK(rig.overlaps.load() == 0);
    // The executor's ops ran in the order of their numbers, and with the device ops they took
    // every number once.
    std::vector<std::uint32_t> all;
    {
      std::lock_guard lock(rig.mutex);
      CHECK(std::is_sorted(rig.order.begin(), rig.order.end()));
      all = rig.order;
    }
    all.insert(all.end(), external.begin(), external.end());
    std::sort(all.begin(), all.end());
    std::vector<std::uint32_t> expected(kOwnerOps + kSharerOps + kExternalOps);
    for (std::uint32_t i = 0; i < expected.size(); ++i) expected[i] = i;
    CHECK(all == expected);
    grants += rig.e.bias_grants();
  }
  // The biased path took part (where membarrier exists).
  if (cohort::process_fence_available()) CHECK(grants > 0);
}

TEST_CASE("an abort from another thread reaches the bias thread's next op", "[comm][executor]") {
  if (!can_bias()) return;
  const BiasAfter after(2);
  Rig rig;
  for (int i = 0; i < 4; ++i) rig.e.run(barrier_info(), rig.body(0us));
  REQUIRE(rig.e.biased());
  std::thread([&] { rig.e.abort("stop here"); }).join();
  CHECK_FALSE(rig.e.biased());
  try {
    rig.e.run(barrier_info(), rig.body(0us));
    FAIL("a biased op ran after an abort from another thread");
  } catch (const cohort::Error& error) {
    CHECK(error.code() == cohort::ErrorCode::InvalidUsage);
    CHECK_THAT(error.what(), Catch::Contains("stop here"));
  }
  CHECK(rig.ran_in_order(4));
}
