// Sub-communicators share their world's connections (one UCX worker and set of endpoints per
// process; see transport/ucx/ucx_hub.hpp and comm/split.cpp). What that must not break:
// - many more communicators over a job's life than there are tag ids (2047), so ids are reused;
// - messages of communicators with the same members never match each other's receives;
// - ops on different communicators started in different orders on different ranks, from
//   different threads, all finish (no lock or progress engine serialises them);
// - communicators destroyed in any order, the world first included;
// - splits running at the same time on two threads of every process;
// - error messages name ranks as the communicator numbers them, and the world's;
// - creating sub-communicators opens no file descriptor and starts no thread.

#include "rank_checks.hpp"

#include <catch2/catch.hpp>

#include <deque>
#include <filesystem>
#include <thread>
#include <vector>

namespace {

using namespace cohort;
using namespace cohort::test;

std::size_t entries(const char* directory) {
  std::size_t n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(directory)) ++n;
  return n;
}

/// Every rank sends `value` to the next rank and returns what the previous rank sent.
std::int64_t ring_exchange(Communicator& comm, std::int64_t value, int tag) {
  if (comm.size() == 1) return value;  // no point-to-point to oneself
  const int next = (comm.rank() + 1) % comm.size();
  const int prev = (comm.rank() + comm.size() - 1) % comm.size();
  std::int64_t got = -1;
  Work sent = comm.send_async(Buffer::view(&value, 1, DType::Int64), next, tag);
  comm.recv(Buffer::view(&got, 1, DType::Int64), prev, tag);
  sent.wait();
  return got;
}

void check_more_communicators_than_tag_ids(Communicator& world) {
  const int rank = world.rank(), size = world.size();
  // 2,100 dups (the tag id field has 2,048 values), three alive at any time, a ring exchange on
  // each: tag ids are freed and reused, and a reused id never picks up an older message.
  constexpr int kCommunicators = 2100;
  std::deque<std::shared_ptr<Communicator>> alive;
  for (int i = 0; i < kCommunicators; ++i) {
    alive.push_back(world.dup());
    if (alive.size() > 3) alive.pop_front();
    const std::int64_t got = ring_exchange(*alive.back(), 1000 * i + rank, 5);
    const int prev = (rank + size - 1) % size;
    RANK_CHECK(got == 1000 * i + prev, "communicator " << i << " received " << got);
    if (i % 500 == 0) {
      std::int64_t one = 1;
      world.allreduce(Buffer::view(&one, 1, DType::Int64), ReduceOp::Sum);
      RANK_CHECK(one == size, "world allreduce between dups gave " << one);
    }
  }
}

void check_same_members_never_cross(Communicator& world) {
  if (world.size() < 2) return;
  auto first = world.dup();
  auto second = world.dup();
  // Rank 0 sends to rank 1 on both with the same user tag; rank 1 receives on the second first.
  if (world.rank() == 0) {
    std::int64_t a = 111, b = 222;
    Work wa = first->send_async(Buffer::view(&a, 1, DType::Int64), 1, 7);
    Work wb = second->send_async(Buffer::view(&b, 1, DType::Int64), 1, 7);
    wb.wait();
    wa.wait();
  } else if (world.rank() == 1) {
    std::int64_t on_second = 0, on_first = 0;
    second->recv(Buffer::view(&on_second, 1, DType::Int64), 0, 7);
    first->recv(Buffer::view(&on_first, 1, DType::Int64), 0, 7);
    RANK_CHECK(on_second == 222 && on_first == 111,
               "second got " << on_second << ", first got " << on_first);
  }
  world.barrier();
}

void check_cross_ordered_ops(Communicator& world) {
  const int rank = world.rank(), size = world.size();
  auto a = world.dup();
  auto b = world.dup();
  // Large enough for many ring steps through the shared worker; the ring algorithm forced so
  // the messages go through UCX rather than the shared arena.
  constexpr std::size_t kCount = 1 << 18;
  CollectiveOptions ring;
  ring.algorithm = Algorithm::Ring;
  std::vector<float> on_a(kCount, 1.0f), on_b(kCount, 2.0f);
  const Buffer ba = Buffer::view(on_a.data(), kCount, DType::Float32);
  const Buffer bb = Buffer::view(on_b.data(), kCount, DType::Float32);
  if (rank == 0) {
    // b first, in the background; then a, blocking. The other ranks do b, then a, both blocking:
    // rank 0's a can only finish if its b keeps moving while this thread waits on a.
    Work wb = b->allreduce_async(bb, bb, ReduceOp::Sum, ring);
    a->allreduce(ba, ReduceOp::Sum, ring);
    wb.wait();
  } else {
    b->allreduce(bb, ReduceOp::Sum, ring);
    a->allreduce(ba, ReduceOp::Sum, ring);
  }
  expect_values(
      ba, 0, kCount, [&](std::size_t) { return size; }, "allreduce on a");
  expect_values(
      bb, 0, kCount, [&](std::size_t) { return 2.0 * size; }, "allreduce on b");
}

void check_destroy_in_any_order(std::shared_ptr<Communicator> world) {
  const int rank = world->rank(), size = world->size();
  auto halves = world->split(rank % 2, rank);
  auto copy = world->dup();
  world.reset();  // the world goes first; its connections live on in its children
  std::int64_t v = rank;
  copy->allreduce(Buffer::view(&v, 1, DType::Int64), ReduceOp::Sum);
  RANK_CHECK(v == size * (size - 1) / 2, "dup after the world was destroyed: " << v);
  copy.reset();
  std::int64_t w = 1;
  halves->allreduce(Buffer::view(&w, 1, DType::Int64), ReduceOp::Sum);
  RANK_CHECK(w == halves->size(), "split after world and dup were destroyed: " << w);
  auto grandchild = halves->dup();
  halves.reset();
  grandchild->barrier();
}

void check_concurrent_splits(Communicator& world) {
  const int rank = world.rank(), size = world.size();
  auto left = world.dup();
  auto right = world.dup();
  // Two threads split two parents at the same time, 20 times each; every child is used at once,
  // so two children that got the same tag id on a shared member would mix their messages.
  constexpr int kSplits = 20;
  std::exception_ptr failure;
  std::thread other([&] {
    try {
      for (int i = 0; i < kSplits; ++i) {
        auto child = right->split(0, -rank);  // everyone, reversed
        std::int64_t v = 10 * rank + i;
        child->allreduce(Buffer::view(&v, 1, DType::Int64), ReduceOp::Sum);
        RANK_CHECK(v == 10 * size * (size - 1) / 2 + size * i, "right child " << i << ": " << v);
      }
    } catch (...) {
      failure = std::current_exception();
    }
  });
  for (int i = 0; i < kSplits; ++i) {
    auto child = left->split(rank % 2, rank);
    std::int64_t v = 1000 + i;
    child->allreduce(Buffer::view(&v, 1, DType::Int64), ReduceOp::Sum);
    RANK_CHECK(v == child->size() * (1000 + i), "left child " << i << ": " << v);
  }
  other.join();
  if (failure) std::rethrow_exception(failure);
}

void check_error_names_both_ranks(Communicator& world) {
  if (world.size() < 3) return;
  const int rank = world.rank();
  // Even world ranks form a group: with 3 or more ranks, world rank 2 is its rank 1.
  auto evens = world.split(rank % 2 == 0 ? 0 : Communicator::kNoColor, rank);
  if (rank == 0) {
    std::int64_t never = 0;
    CollectiveOptions soon;
    soon.timeout = std::chrono::milliseconds(300);
    expect_error([&] { evens->recv(Buffer::view(&never, 1, DType::Int64), 1, 3, soon); },
                 ErrorCode::Timeout, {"recv", "rank 1 (world rank 2)"}, "receive nobody sends");
  }
  evens.reset();
  // The failed sub-communicator poisoned itself only: the world and new splits work.
  std::int64_t one = 1;
  world.allreduce(Buffer::view(&one, 1, DType::Int64), ReduceOp::Sum);
  RANK_CHECK(one == world.size(), "world after a sub-communicator failed: " << one);
}

void check_no_resources_per_split(Communicator& world) {
  world.barrier();
  const std::size_t fds = entries("/proc/self/fd");
  const std::size_t threads = entries("/proc/self/task");
  std::vector<std::shared_ptr<Communicator>> kept;
  for (int i = 0; i < 10; ++i) kept.push_back(world.split(world.rank() % 2, 0));
  RANK_CHECK(entries("/proc/self/fd") == fds,
             "10 splits opened " << entries("/proc/self/fd") - fds << " file descriptors");
  RANK_CHECK(entries("/proc/self/task") == threads,
             "10 splits started " << entries("/proc/self/task") - threads << " threads");
}

}  // namespace

TEST_CASE("sub-communicators share the world's connections", "[comm][multiproc]") {
  const int size = GENERATE(1, 2, 3, 4);
  CAPTURE(size);
  REQUIRE_NOTHROW(run_ranks(size, [](const Environment& env) {
    auto c = world(env);
    check_no_resources_per_split(*c);
    check_same_members_never_cross(*c);
    check_cross_ordered_ops(*c);
    check_concurrent_splits(*c);
    check_error_names_both_ranks(*c);
    check_more_communicators_than_tag_ids(*c);
    check_destroy_in_any_order(std::move(c));
  }));
}
