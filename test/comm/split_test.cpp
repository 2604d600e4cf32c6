// split() and dup(): group membership and ordering by (key, old rank), kNoColor, unique ids,
// and collectives on sub-communicators running concurrently with the parent's.

#include "rank_checks.hpp"
#include "support/temp_dir.hpp"
#include "transport/tag_ids.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <sys/resource.h>

namespace {

using namespace cohort;
using namespace cohort::test;

double sum_of_ranks(const std::vector<int>& ranks) {
  double s = 0;
  for (int r : ranks) s += r;
  return s;
}

// World ranks of the members of `color` in a split by parity.
std::vector<int> parity_members(int world, int parity) {
  std::vector<int> members;
  for (int r = parity; r < world; r += 2) members.push_back(r);
  return members;
}

void check_parity_split(Communicator& world_comm) {
  const int rank = world_comm.rank(), size = world_comm.size();
  auto sub = world_comm.split(rank % 2, rank);
  RANK_CHECK(sub, "split returned null for a real color");
  const std::vector<int> members = parity_members(size, rank % 2);
  RANK_CHECK(sub->size() == static_cast<int>(members.size()), "sub size " << sub->size());
  RANK_CHECK(sub->rank() == rank / 2, "sub rank " << sub->rank() << " for world rank " << rank);
  RANK_CHECK(sub->id() != 0 && sub->id() != world_comm.id(), "sub id " << sub->id());

  // Ids: the same within a group, different across groups.
  Buffer mine = Buffer::allocate(1, DType::Int64);
  set(mine, 0, sub->id());
  Buffer ids = Buffer::allocate(static_cast<std::size_t>(size), DType::Int64);
  world_comm.allgather(mine, ids);
  for (int r = 0; r < size; ++r) {
    const bool same_group = r % 2 == rank % 2;
    RANK_CHECK((get(ids, static_cast<std::size_t>(r)) == sub->id()) == same_group,
               "rank " << r << " has sub id " << get(ids, static_cast<std::size_t>(r)) << ", mine "
                       << sub->id());
  }

  // Concurrent traffic: a thread runs collectives on the sub-communicator while this thread
  // runs them on the parent; each has its own transport, executor and tag space.
  constexpr int kRounds = 30;
  std::exception_ptr sub_failure;
  std::thread sub_thread([&] {
    try {
      for (int round = 0; round < kRounds; ++round) {
        Buffer b = Buffer::allocate(100, DType::Float64);
        for (std::size_t i = 0; i < 100; ++i) set(b, i, rank + round);
        sub->allreduce(b, ReduceOp::Sum);
        expect_values(
            b, 0, 100,
            [&](std::size_t) {
              return sum_of_ranks(members) + static_cast<double>(members.size()) * round;
            },
            "sub allreduce round " + std::to_string(round));
      }
    } catch (...) {
      sub_failure = std::current_exception();
    }
  });
  for (int round = 0; round < kRounds; ++round) {
    Buffer b = Buffer::allocate(100, DType::Int32);
    for (std::size_t i = 0; i < 100; ++i) set(b, i, 1);
    Work w = world_comm.allreduce_async(b, b, ReduceOp::Sum);
    w.wait();
    expect_values(
        b, 0, 100, [&](std::size_t) { return size; }, "parent allreduce");
  }
  sub_thread.join();
  if (sub_failure) std::rethrow_exception(sub_failure);
}

void check_key_reversal(Communicator& world_comm) {
  const int rank = world_comm.rank(), size = world_comm.size();
  auto reversed = world_comm.split(7, -rank);
  RANK_CHECK(reversed && reversed->size() == size, "reversed split size");
  RANK_CHECK(reversed->rank() == size - 1 - rank, "reversed rank " << reversed->rank());
  // Equal keys fall back to the old rank's order.
  auto tied = world_comm.split(3, 42);
  RANK_CHECK(tied->rank() == rank, "tied keys: rank " << tied->rank());
  // Broadcast from the reversed communicator's root 0 (world rank size - 1).
  Buffer b = Buffer::allocate(8, DType::Int32);
  for (std::size_t i = 0; i < 8; ++i) set(b, i, rank);
  reversed->broadcast(b, 0);
  expect_values(
      b, 0, 8, [&](std::size_t) { return size - 1.0; }, "broadcast on reversed");
}

void check_no_color(Communicator& world_comm) {
  const int rank = world_comm.rank(), size = world_comm.size();
  // Rank 0 opts out; the others form one group.
  auto sub = world_comm.split(rank == 0 ? Communicator::kNoColor : 1, rank);
  if (rank == 0) {
    RANK_CHECK(!sub, "kNoColor got a communicator");
  } else {
    RANK_CHECK(sub && sub->size() == size - 1 && sub->rank() == rank - 1, "opted-in group");
    Buffer b = Buffer::allocate(3, DType::Int64);
    for (std::size_t i = 0; i < 3; ++i) set(b, i, rank);
    sub->allreduce(b, ReduceOp::Sum);
    expect_values(
        b, 0, 3, [&](std::size_t) { return size * (size - 1) / 2.0; }, "allreduce without rank 0");
  }
  expect_error([&] { world_comm.split(-5, 0); }, ErrorCode::InvalidArgument, {"color -5"},
               "split with a negative color");
}

void check_dup(Communicator& world_comm) {
  auto copy = world_comm.dup();
  RANK_CHECK(copy && copy->rank() == world_comm.rank() && copy->size() == world_comm.size(),
             "dup ranks");
  RANK_CHECK(copy->id() != world_comm.id(), "dup kept the parent's id");
  Buffer a = Buffer::allocate(10, DType::Float32);
  Buffer b = Buffer::allocate(10, DType::Float32);
  for (std::size_t i = 0; i < 10; ++i) {
    set(a, i, 1);
    set(b, i, 2);
  }
  // Outstanding on both at once: separate tag spaces keep them apart.
  Work wa = world_comm.allreduce_async(a, a, ReduceOp::Sum);
  Work wb = copy->allreduce_async(b, b, ReduceOp::Sum);
  wb.wait();
  wa.wait();
  expect_values(
      a, 0, 10, [&](std::size_t) { return world_comm.size(); }, "parent");
  expect_values(
      b, 0, 10, [&](std::size_t) { return 2.0 * world_comm.size(); }, "dup");
  // A dup of a sub-communicator works too.
  auto copy_of_copy = copy->dup();
  copy_of_copy->barrier();
}

}  // namespace

TEST_CASE("split by parity, key order, kNoColor, dup", "[comm][multiproc]") {
  const int size = GENERATE(1, 2, 3, 5);
  CAPTURE(size);
  REQUIRE_NOTHROW(run_ranks(size, [](const Environment& env) {
    auto c = world(env);
    check_parity_split(*c);
    check_key_reversal(*c);
    check_no_color(*c);
    check_dup(*c);
  }));
}

TEST_CASE("a split that finds no common tag id by a member's deadline fails on every member alike",
          "[comm][multiproc]") {
  // Rank 1 offers no tag id (the testing seam answers its offers busy, as while another of its
  // threads splits), so the split retries until a member's deadline (2 s) passes. Rank 1 enters
  // first (rank 0 waits for its store key), so the two deadlines differ. Every member must give
  // up at the same attempt, with the same Timeout: when each gave up on its own deadline, the
  // other went on to an attempt nobody joined ("allgather #901322 (shared_memory): deadline
  // passed"), or met the first rank's next op there.
  REQUIRE_NOTHROW(run_ranks(2, [](const Environment& env) {
    CommunicatorOptions options;
    options.timeout = std::chrono::seconds(2);
    auto c = world(env, options);
    const std::shared_ptr<Store> store = connect_store(env);
    if (env.rank == 1) {
      cohort::transport::testing::offer_busy(true);
      store->set_string("split_test/out_of_time/entering", "1");
    } else {
      store->get_string("split_test/out_of_time/entering", std::chrono::seconds(60));
    }
    std::string failure;
    try {
      c->split(0, env.rank);
    } catch (const Error& e) {
      RANK_CHECK(e.code() == ErrorCode::Timeout, "the split failed otherwise: " << e.what());
      failure = e.message();
    }
    RANK_CHECK(failure.find("attempts to agree on a free tag id") != std::string::npos &&
                   failure.find("deadline passed on rank") != std::string::npos,
               "the split that ran out of time: " << (failure.empty() ? "no error" : failure));
    store->set_string("split_test/out_of_time/failure/" + std::to_string(env.rank), failure);
    const std::string other = store->get_string(
        "split_test/out_of_time/failure/" + std::to_string(1 - env.rank), std::chrono::seconds(60));
    RANK_CHECK(other == failure,
               "the ranks gave up differently: '" << failure << "' against '" << other << "'");
    cohort::transport::testing::offer_busy(false);
    // Both ranks left at the same attempt: the parent still pairs their ops.
    auto again = c->split(0, env.rank);
    RANK_CHECK(again && again->size() == 2, "the split after the seam was lifted");
    Buffer b = Buffer::allocate(4, DType::Int32);
    for (std::size_t i = 0; i < 4; ++i) set(b, i, env.rank + 1);
    again->allreduce(b, ReduceOp::Sum);
    expect_values(
        b, 0, 4, [](std::size_t) { return 3; }, "an allreduce on the new communicator");
  }));
}

TEST_CASE("a tag id handed out again does not deliver its old communicator's unreceived message",
          "[comm][multiproc]") {
  // Rank 1 sends a message on a dup() that rank 0 never receives; both destroy the dup. The
  // tag id comes back after every other was handed out (tag_ids.hpp), which the loop below
  // forces; on the dup that gets it, rank 0's receive must get the new communicator's message,
  // not the old one that UCX kept all along. Shared memory off: UCX holds the message, not a
  // fastbox.
  REQUIRE_NOTHROW(run_ranks(2, [](const Environment& env) {
    ::setenv("COHORT_SHARED_MEMORY", "off", 1);
    auto w = world(env);
    Buffer value = Buffer::allocate(4, DType::Int32);
    {
      auto stale = w->dup();
      if (env.rank == 1) {
        for (std::size_t i = 0; i < 4; ++i) set(value, i, 111.0);
        stale->send(value, 0, 5);
      }
      w->barrier();  // after the send on the same connection: rank 0 has the message by now
    }
    // Every other id once (0 is the world's, the last the handshake's): the next is the old one.
    for (std::uint32_t i = 0; i + 3 < transport::kTagIds; ++i) w->dup();
    auto reused = w->dup();
    if (env.rank == 1) {
      for (std::size_t i = 0; i < 4; ++i) set(value, i, 222.0);
      reused->send(value, 0, 5);
    } else {
      reused->recv(value, 1, 5);
      expect_values(
          value, 0, 4, [](std::size_t) { return 222.0; }, "the message on the reused tag id");
    }
    w->barrier();
  }));
}

TEST_CASE("a destroyed communicator's unreceived 256 MiB message is dropped without a copy of it",
          "[comm][multiproc]") {
  // Rank 1 sends 256 MiB on a dup that rank 0 never receives from; rank 0 destroys the dup,
  // which takes the message out of UCX's unexpected queue. A rendezvous (shared memory off: UCX
  // carries it), so until then UCX holds only its announcement. Taking it must not fetch it:
  // rank 0's peak resident memory stays well under the message's size (a drain that received
  // each message into memory of its own size grew it by 256 MiB), and rank 1's send still ends.
  REQUIRE_NOTHROW(run_ranks(2, [](const Environment& env) {
    ::setenv("COHORT_SHARED_MEMORY", "off", 1);
    constexpr std::size_t kCount = std::size_t{64} << 20;  // 256 MiB of int32
    auto w = world(env);
    auto stale = w->dup();
    Buffer big = env.rank == 1 ? Buffer::allocate(kCount, DType::Int32) : Buffer{};
    std::optional<Work> sent;
    if (env.rank == 1) sent = stale->send_async(big, 0, 5);
    w->barrier();  // after the send's announcement on the same connection: rank 0 has it
    const auto peak_kib = [] {
      rusage usage{};
      ::getrusage(RUSAGE_SELF, &usage);
      return static_cast<long>(usage.ru_maxrss);
    };
    const long before = peak_kib();
    if (env.rank == 0) stale.reset();
    w->barrier();
    if (env.rank == 1) sent->wait();  // answered by rank 0's drain (or fetched by it)
    w->barrier();
    if (env.rank == 0) {
      const long grown = peak_kib() - before;
      RANK_CHECK(grown < 64 * 1024, "draining the unreceived message grew rank 0's peak memory by "
                                        << grown / 1024 << " MiB");
    }
  }));
}

TEST_CASE("a split's one-host group gets its shared arena whatever node index the launcher gave",
          "[comm][multiproc]") {
  // As under `mpirun --map-by node`, where the node index is derived as rank / local size: the
  // launcher's placement says two nodes of two ranks, ranks alternating, while every rank is on
  // this host. The dup must still see one host and run the shared-memory allreduce, as its
  // parent does (it was denied the arena before: its ranks' node indices differed).
  REQUIRE_NOTHROW(run_ranks(4, [](const Environment& env) {
    Environment placed = env;
    placed.node_rank = env.rank % 2;
    placed.num_nodes = 2;
    placed.local_world_size = 2;
    placed.local_rank = env.rank / 2;
    auto w = Communicator::create(placed, connect_store(env));
    auto d = w->dup();
    const TempDir dir("cohort-split-arena");
    for (auto* c : {w.get(), d.get()}) {
      Buffer b = Buffer::allocate(64, DType::Float32);
      c->allreduce(b, ReduceOp::Sum);
      const std::string path = (dir.path() / "record.json").string();
      c->dump_trace(path);
      std::ifstream in(path);
      const std::string ran =
          nlohmann::json::parse(in).at("ops").back().at("algorithm").get<std::string>();
      RANK_CHECK(ran == "shared_memory", (c == w.get() ? "the world" : "the dup")
                                             << "'s allreduce ran " << ran);
    }
  }));
}
