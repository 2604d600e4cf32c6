// *_async collectives and Work: several ops outstanding at once complete with the right results
// in call order; blocking calls queue behind outstanding async ops; Work::wait(timeout) gives up
// without cancelling the op.

#include "rank_checks.hpp"
#include "support/temp_dir.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <fstream>
#include <mutex>
#include <thread>
#include <vector>

#include <sched.h>

namespace {

using namespace cohort;
using namespace cohort::test;
using namespace std::chrono_literals;

double value(int rank, std::size_t i) {
  return static_cast<double>(rank + 1) * static_cast<double>(i % 17 + 1);
}

double sum_over_ranks(int size, std::size_t i) {
  double acc = 0;
  for (int r = 0; r < size; ++r) acc += value(r, i);
  return acc;
}

void check_outstanding_ops(Communicator& c) {
  // Eight allreduces of different sizes (small ones inline-sized, large ones past the
  // rendezvous threshold), all outstanding at once.
  const std::size_t counts[] = {1, 7, 100, 1000, 4096, 33333, 5, 100000};
  std::vector<Buffer> buffers;
  std::vector<Work> works;
  for (std::size_t count : counts) {
    Buffer b = Buffer::allocate(count, DType::Float32);
    for (std::size_t i = 0; i < count; ++i) set(b, i, value(c.rank(), i));
    works.push_back(c.allreduce_async(b, b, ReduceOp::Sum));
    buffers.push_back(b);
  }
  // Order matters on one buffer: broadcast from the last rank, then allreduce; the reverse
  // order would give a different result.
  Buffer ordered = Buffer::allocate(64, DType::Int64);
  for (std::size_t i = 0; i < 64; ++i) set(ordered, i, value(c.rank(), i));
  const int last = c.size() - 1;
  works.push_back(c.broadcast_async(ordered, ordered, last));
  works.push_back(c.allreduce_async(ordered, ordered, ReduceOp::Sum));
  for (Work& w : works) {
    RANK_CHECK(w.valid(), "async op returned an empty Work");
    w.wait();
    RANK_CHECK(w.test(), "test() false after wait()");
    w.wait();  // waiting again after success returns at once
  }
  for (std::size_t k = 0; k < buffers.size(); ++k) {
    expect_values(
        buffers[k], 0, counts[k], [&](std::size_t i) { return sum_over_ranks(c.size(), i); },
        "async allreduce #" + std::to_string(k));
  }
  expect_values(
      ordered, 0, 64, [&](std::size_t i) { return c.size() * value(last, i); },
      "broadcast then allreduce, in call order");
}

void check_blocking_behind_async(Communicator& c) {
  // A blocking call issued while async ops are outstanding queues behind them.
  Buffer a = Buffer::allocate(50000, DType::Float64);
  Buffer b = Buffer::allocate(10, DType::Float64);
  for (std::size_t i = 0; i < a.count(); ++i) set(a, i, value(c.rank(), i));
  for (std::size_t i = 0; i < b.count(); ++i) set(b, i, value(c.rank(), i));
  Work w = c.allreduce_async(a, a, ReduceOp::Max);
  c.allreduce(b, ReduceOp::Sum);
  RANK_CHECK(w.test(), "an async op issued earlier had not finished after a later blocking op");
  w.wait();
  expect_values(
      a, 0, a.count(), [&](std::size_t i) { return value(c.size() - 1, i); }, "async max");
  expect_values(
      b, 0, b.count(), [&](std::size_t i) { return sum_over_ranks(c.size(), i); }, "blocking sum");
  // Every kind of async collective once.
  const std::size_t n = static_cast<std::size_t>(c.size());
  Buffer in = Buffer::allocate(2 * n, DType::Int32);
  Buffer gathered = Buffer::allocate(2 * n * n, DType::Int32);
  Buffer scattered = Buffer::allocate(2, DType::Int32);
  Buffer exchanged = Buffer::allocate(2 * n, DType::Int32);
  Buffer reduced = Buffer::allocate(2 * n, DType::Int32);
  for (std::size_t i = 0; i < 2 * n; ++i) set(in, i, static_cast<double>(c.rank()));
  std::vector<std::size_t> counts(n, 2);
  std::vector<std::size_t> all(n, 2);
  std::vector<Work> works;
  works.push_back(c.allgather_async(in, gathered));
  works.push_back(c.reduce_scatter_async(in, scattered, ReduceOp::Sum));
  works.push_back(c.alltoall_async(in, exchanged));
  works.push_back(c.reduce_async(in, reduced, ReduceOp::Max, 0));
  works.push_back(c.barrier_async());
  Buffer vg = Buffer::allocate(2 * n, DType::Int32);
  works.push_back(c.allgatherv_async(in.slice(0, 2), vg, counts));
  Buffer gv = c.rank() == 0 ? Buffer::allocate(2 * n, DType::Int32) : Buffer();
  works.push_back(c.gatherv_async(in.slice(0, 2), gv, counts, 0));
  Buffer sv = Buffer::allocate(2, DType::Int32);
  works.push_back(c.scatterv_async(c.rank() == 0 ? in : Buffer(), sv, counts, 0));
  Buffer av = Buffer::allocate(2 * n, DType::Int32);
  works.push_back(c.alltoallv_async(in, all, av, all));
  Buffer g = c.rank() == 0 ? Buffer::allocate(2 * n * n, DType::Int32) : Buffer();
  works.push_back(c.gather_async(in, g, 0));
  Buffer s = Buffer::allocate(2 * n, DType::Int32);
  works.push_back(c.scatter_async(c.rank() == 0 ? gathered : Buffer(), s, 0));
  for (Work& w : works) w.wait();
  const double total = static_cast<double>(c.size() * (c.size() - 1) / 2);
  expect_values(
      gathered, 0, 2 * n * n, [&](std::size_t i) { return static_cast<double>(i / (2 * n)); },
      "allgather_async");
  expect_values(
      scattered, 0, 2, [&](std::size_t) { return total; }, "reduce_scatter_async");
  expect_values(
      exchanged, 0, 2 * n, [&](std::size_t i) { return static_cast<double>(i / 2); },
      "alltoall_async");
  if (c.rank() == 0)
    expect_values(
        reduced, 0, 2 * n, [&](std::size_t) { return c.size() - 1.0; }, "reduce_async");
  expect_values(
      vg, 0, 2 * n, [&](std::size_t i) { return static_cast<double>(i / 2); }, "allgatherv_async");
  if (c.rank() == 0)
    expect_values(
        gv, 0, 2 * n, [&](std::size_t i) { return static_cast<double>(i / 2); }, "gatherv_async");
  expect_values(
      sv, 0, 2, [&](std::size_t) { return 0.0; }, "scatterv_async (root 0's values)");
  expect_values(
      av, 0, 2 * n, [&](std::size_t i) { return static_cast<double>(i / 2); }, "alltoallv_async");
  if (c.rank() == 0)
    expect_values(
        g, 0, 2 * n * n, [&](std::size_t i) { return static_cast<double>(i / (2 * n)); },
        "gather_async");
  // Root 0 scatters its gathered copy: rank r gets block r, which is 2n copies of... rank r's
  // allgathered block holds rank index k at [2n*k, 2n*k+2n); block r of size 2n is all r.
  expect_values(
      s, 0, 2 * n, [&](std::size_t) { return static_cast<double>(c.rank()); }, "scatter_async");
}

/// Waits until this rank's flight record shows collective `seq` started and not finished: the
/// op is inside its wait on another thread, not about to begin. Throws after `timeout`.
void wait_until_running(Communicator& c, std::uint32_t seq, std::chrono::seconds timeout) {
  const TempDir dir("cohort-async-test");
  const std::string path = (dir.path() / "record.json").string();
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    c.dump_trace(path);
    std::ifstream in(path);
    const nlohmann::json record = nlohmann::json::parse(in);
    for (const auto& op : record.at("ops"))
      if (op.at("seq") == seq && op.at("state") == "started") return;
    sched_yield();
  }
  throw std::runtime_error("collective #" + std::to_string(seq) + " never showed as running");
}

}  // namespace

TEST_CASE("async collectives: many outstanding, results right and in order", "[comm][multiproc]") {
  const int size = GENERATE(1, 2, 3, 5);
  CAPTURE(size);
  REQUIRE_NOTHROW(run_ranks(size, [](const Environment& env) {
    ::setenv("UCX_RNDV_THRESH", "4096", 1);  // exercise the rendezvous path too
    auto c = world(env);
    check_outstanding_ops(*c);
    check_blocking_behind_async(*c);
    RANK_CHECK(!Work().valid(), "a default Work is valid");
  }));
}

TEST_CASE("Work::wait with a timeout gives up without cancelling the op", "[comm][multiproc]") {
  REQUIRE_NOTHROW(run_ranks(2, [](const Environment& env) {
    auto c = world(env);
    const std::shared_ptr<Store> store = connect_store(env);
    Buffer b = Buffer::allocate(16, DType::Int32);
    for (std::size_t i = 0; i < 16; ++i) set(b, i, 1.0);
    if (env.rank == 0) {
      // Rank 1 joins only once rank 0 has given up waiting, so the op cannot finish in 100 ms.
      Work w = c->allreduce_async(b, b, ReduceOp::Sum);
      const Error gave_up = caught_error([&] { w.wait(100ms); }, ErrorCode::Timeout,
                                         {"allreduce #0", "100 ms"}, "Work::wait(100ms)");
      RANK_CHECK(gave_up.context().op == "allreduce" && gave_up.context().sequence == 0u,
                 "Work::wait's timeout names the op by fields: " << gave_up.what());
      RANK_CHECK(!w.test(), "op finished although its peer had not joined");
      store->set_string("async_test/rank0_gave_up", "1");
      c->barrier();  // queued behind the allreduce
      w.wait();
    } else {
      store->get_string("async_test/rank0_gave_up", 60s);
      c->allreduce(b, ReduceOp::Sum);
      c->barrier();
    }
    expect_values(
        b, 0, 16, [](std::size_t) { return 2.0; }, "allreduce after the wait timeout");
  }));
}

TEST_CASE("a finished *_async collective no longer holds its buffers' owners",
          "[comm][multiproc]") {
  // Rank 0's buffer is kept alive only by the queued allreduce; its owner's deleter records
  // whether the Work already reported the op finished. The others join only once rank 0 has
  // stored the Work where the deleter sees it, so the op cannot finish before.
  const int size = GENERATE(2, 3);
  CAPTURE(size);
  REQUIRE_NOTHROW(run_ranks(size, [](const Environment& env) {
    auto c = world(env);
    const std::shared_ptr<Store> store = connect_store(env);
    constexpr std::size_t kCount = 100;
    if (env.rank == 0) {
      struct Probe {
        std::mutex mutex;
        Work work;
        bool released = false;
        bool finished_before_release = false;
      };
      auto probe = std::make_shared<Probe>();
      std::shared_ptr<std::int32_t[]> memory(new std::int32_t[kCount]);
      for (std::size_t i = 0; i < kCount; ++i) memory[i] = static_cast<std::int32_t>(i);
      std::int32_t* const data = memory.get();
      Work w;
      {
        std::shared_ptr<void> owner(data, [probe, memory](void*) {
          std::lock_guard lock(probe->mutex);
          probe->released = true;
          probe->finished_before_release = probe->work.valid() && probe->work.test();
        });
        const Buffer b = Buffer::view(data, {static_cast<std::int64_t>(kCount)}, DType::Int32,
                                      Device::cpu(), {}, 0, owner);
        w = c->allreduce_async(b, b, ReduceOp::Sum);
        std::lock_guard lock(probe->mutex);
        probe->work = w;
      }
      memory.reset();
      store->set_string("async_test/owner/submitted", "1");
      w.wait();
      std::lock_guard lock(probe->mutex);
      RANK_CHECK(probe->released, "wait() returned while the op still held its buffer's owner");
      RANK_CHECK(!probe->finished_before_release,
                 "the Work reported the op finished before it let go of its buffer's owner");
      // The deleter ran, so `data` is gone: the values were checked by the others (same sum).
      probe->work = Work();
    } else {
      store->get_string("async_test/owner/submitted", 60s);
      Buffer b = Buffer::allocate(kCount, DType::Int32);
      for (std::size_t i = 0; i < kCount; ++i) set(b, i, static_cast<double>(i));
      c->allreduce(b, ReduceOp::Sum);
      expect_values(
          b, 0, kCount, [&](std::size_t i) { return static_cast<double>(i) * c->size(); },
          "allreduce of i on every rank");
    }
  }));
}

TEST_CASE("ops from another thread wait for a blocking op that runs without the lock",
          "[comm][multiproc]") {
  // Rank 0's first thread blocks inside a broadcast from rank 1, which has not joined: an op on
  // the executor's fast path, whose end wakes nobody. Its second thread then queues an
  // allreduce and a barrier; they must run after the broadcast, in that order, once rank 1
  // joins. With three ranks, a rank that takes no part in rank 0's threads checks the order too.
  const int size = GENERATE(2, 3);
  REQUIRE_NOTHROW(run_ranks(size, [](const Environment& env) {
    auto c = world(env);
    const std::shared_ptr<Store> store = connect_store(env);
    Buffer b = Buffer::allocate(8, DType::Int32);
    Buffer x = Buffer::allocate(1000, DType::Float64);
    for (std::size_t i = 0; i < 8; ++i) set(b, i, 10.0 * env.rank + static_cast<double>(i));
    for (std::size_t i = 0; i < x.count(); ++i) set(x, i, value(env.rank, i));
    if (env.rank == 0) {
      std::exception_ptr failure;
      std::thread first([&] {
        try {
          c->broadcast(b, b, 1);
        } catch (...) {
          failure = std::current_exception();
        }
      });
      // Joined on every way out, so a failure here is reported instead of terminating.
      struct Joiner {
        std::thread& t;
        ~Joiner() { t.join(); }
      } joiner{first};
      wait_until_running(*c, 0, 60s);
      Work w = c->allreduce_async(x, x, ReduceOp::Sum);
      store->set_string("async_test/fast/submitted", "1");
      c->barrier();  // queued behind the allreduce, from this thread
      RANK_CHECK(w.test(), "the allreduce queued first had not finished after the barrier");
      first.join();
      first = std::thread([] {});  // Joiner's join then has a thread to join
      if (failure) std::rethrow_exception(failure);
    } else {
      store->get_string("async_test/fast/submitted", 60s);
      c->broadcast(b, b, 1);
      c->allreduce(x, ReduceOp::Sum);
      c->barrier();
    }
    expect_values(
        b, 0, 8, [](std::size_t i) { return 10.0 + static_cast<double>(i); },
        "broadcast from rank 1");
    expect_values(
        x, 0, x.count(), [&](std::size_t i) { return sum_over_ranks(c->size(), i); },
        "allreduce queued behind it");
    // Idle again: blocking calls take the fast path, and still agree.
    Buffer y = Buffer::allocate(3, DType::Int64);
    for (int k = 0; k < 50; ++k) {
      for (std::size_t i = 0; i < 3; ++i) set(y, i, static_cast<double>(env.rank + k));
      c->allreduce(y, ReduceOp::Max);
      expect_values(
          y, 0, 3, [&](std::size_t) { return static_cast<double>(c->size() - 1 + k); },
          "allreduce after the queue drained");
    }
  }));
}
