// send/recv: a ring with send_async + recv (no deadlock although sends may need the receive
// posted first), blocking calls in matching order, per-tag ordering, and mixing with collectives.

#include "rank_checks.hpp"
#include "support/blocked_thread.hpp"

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

namespace {

using namespace cohort;
using namespace cohort::test;
using namespace std::chrono_literals;

double payload(int from, int tag, std::size_t i) {
  return from * 1000.0 + tag * 100.0 + static_cast<double>(i % 97);
}

Buffer message(int from, int tag, std::size_t count) {
  Buffer b = Buffer::allocate(count, DType::Float64);
  for (std::size_t i = 0; i < count; ++i) set(b, i, payload(from, tag, i));
  return b;
}

void check_ring(Communicator& c) {
  const int next = (c.rank() + 1) % c.size();
  const int prev = (c.rank() + c.size() - 1) % c.size();
  for (std::size_t count : {std::size_t{1}, std::size_t{200000}}) {  // eager and rendezvous
    Buffer out = message(c.rank(), 0, count);
    Buffer in = Buffer::allocate(count, DType::Float64);
    Work sent = c.send_async(out, next);
    c.recv(in, prev);
    sent.wait();
    expect_values(
        in, 0, count, [&](std::size_t i) { return payload(prev, 0, i); },
        "ring message from rank " + std::to_string(prev));
  }
}

void check_matching_blocking(Communicator& c) {
  // Rank 0 exchanges with every other rank in turn, both directions, all blocking.
  const std::size_t count = 50000;
  if (c.rank() == 0) {
    for (int peer = 1; peer < c.size(); ++peer) {
      c.send(message(0, 3, count), peer, 3);
      Buffer in = Buffer::allocate(count, DType::Float64);
      c.recv(in, peer, 3);
      expect_values(
          in, 0, count, [&](std::size_t i) { return payload(peer, 3, i); }, "reply");
    }
  } else {
    Buffer in = Buffer::allocate(count, DType::Float64);
    c.recv(in, 0, 3);
    expect_values(
        in, 0, count, [&](std::size_t i) { return payload(0, 3, i); }, "request");
    c.send(message(c.rank(), 3, count), 0, 3);
  }
}

void check_tags_and_order(Communicator& c) {
  if (c.size() < 2 || c.rank() > 1) return;
  const int peer = 1 - c.rank();
  const std::size_t count = 1000;
  if (c.rank() == 0) {
    // Three messages on tag 5 (must arrive in this order), one on tag 9.
    std::vector<Work> works;
    std::vector<Buffer> keep;
    for (int k = 0; k < 3; ++k) {
      keep.push_back(message(k, 5, count));
      works.push_back(c.send_async(keep.back(), peer, 5));
    }
    keep.push_back(message(7, 9, count));
    works.push_back(c.send_async(keep.back(), peer, 9));
    for (Work& w : works) w.wait();
  } else {
    // Receive tag 9 first although it was sent last: tags are separate channels.
    Buffer late = Buffer::allocate(count, DType::Float64);
    c.recv(late, peer, 9);
    expect_values(
        late, 0, count, [&](std::size_t i) { return payload(7, 9, i); }, "tag 9");
    for (int k = 0; k < 3; ++k) {
      Buffer in = Buffer::allocate(count, DType::Float64);
      Work w = c.recv_async(in, peer, 5);
      w.wait();
      expect_values(
          in, 0, count, [&](std::size_t i) { return payload(k, 5, i); },
          "tag 5 message " + std::to_string(k));
    }
  }
}

void check_mixed_with_collectives(Communicator& c) {
  // A send left in flight while collectives run, received after them.
  const int next = (c.rank() + 1) % c.size();
  const int prev = (c.rank() + c.size() - 1) % c.size();
  Buffer out = message(c.rank(), 1, 100000);
  Work sent = c.send_async(out, next, 1);
  Buffer b = Buffer::allocate(4, DType::Int32);
  for (std::size_t i = 0; i < 4; ++i) set(b, i, 1);
  c.allreduce(b, ReduceOp::Sum);
  expect_values(
      b, 0, 4, [&](std::size_t) { return c.size(); }, "allreduce with a send in flight");
  Buffer in = Buffer::allocate(100000, DType::Float64);
  c.recv(in, prev, 1);
  sent.wait();
  expect_values(
      in, 0, 100000, [&](std::size_t i) { return payload(prev, 1, i); }, "late recv");
}

// The store key under which `rank` says whether its Work::wait on the send of `round` was
// asleep.
std::string asleep_key(const std::string& round, int rank) {
  return "p2p_test/asleep_in_wait/" + round + "/" + std::to_string(rank);
}

// Waits for `sent` on this thread (for a minute at most) while a watcher thread tells the store,
// under `key`, once this thread sleeps in Work::wait's condition variable (after its polling
// phase): "asleep", or why not. The send is a rendezvous whose receiver posts only after reading
// that key, so the send cannot finish before.
void wait_announcing_sleep(const Work& sent, Store& store, const std::string& key) {
  const pid_t waiter = current_thread_id();
  std::atomic<bool> wait_returned{false};
  std::thread watcher([&] {
    const bool blocked = wait_until_blocked(waiter, BlockedIn::ConditionVariable, 30s);
    // Read after the thread was seen blocked: a block seen after the wait returned is the join.
    const bool asleep_in_wait = blocked && !wait_returned.load();
    store.set_string(key, asleep_in_wait ? "asleep"
                          : blocked      ? "finished before its wait slept"
                                         : "not seen asleep within 30 s");
  });
  try {
    sent.wait(60s);
  } catch (...) {
    wait_returned = true;
    watcher.join();
    throw;
  }
  wait_returned = true;
  watcher.join();
}

// Receives `prev`'s send of `round` (on `tag`) once prev's Work::wait on it sleeps, so only
// prev's progress thread can finish that send.
void receive_after_sender_sleeps(Communicator& c, Store& store, const Buffer& in, int prev,
                                 const std::string& round, int tag) {
  const std::string sender = store.get_string(asleep_key(round, prev), 60s);
  c.recv(in, prev, tag);
  RANK_CHECK(sender == "asleep",
             "rank " << prev << "'s Work::wait on its send (" << round << "): " << sender);
}

void check_send_left_in_flight(Communicator& c, Store& store, const std::string& round, int tag) {
  // A rendezvous send whose receive is posted only after the sender's Work::wait has stopped
  // polling for itself and gone to sleep: only the progress thread can finish it then. Odd
  // ranks wait on their send first, even ranks receive first, so every rank's wait sleeps in
  // turn without a cycle (size 3: 1's wait, 2's receive, 2's wait, 0's receive, 0's wait, 1's
  // receive).
  const int next = (c.rank() + 1) % c.size();
  const int prev = (c.rank() + c.size() - 1) % c.size();
  Buffer out = message(c.rank(), tag, 100000);
  Work sent = c.send_async(out, next, tag);
  Buffer in = Buffer::allocate(100000, DType::Float64);
  if (c.rank() % 2 == 1) {
    wait_announcing_sleep(sent, store, asleep_key(round, c.rank()));
    receive_after_sender_sleeps(c, store, in, prev, round, tag);
  } else {
    receive_after_sender_sleeps(c, store, in, prev, round, tag);
    wait_announcing_sleep(sent, store, asleep_key(round, c.rank()));
  }
  expect_values(
      in, 0, 100000, [&](std::size_t i) { return payload(prev, tag, i); }, "delayed receive");
}

}  // namespace

TEST_CASE("send/recv: a send_async completes while its sender sleeps in wait",
          "[comm][multiproc]") {
  const int size = GENERATE(2, 3);
  // The send is the communicator's very first op, which starts the progress thread; or it is
  // posted on the executor's fast path (without its lock) while that thread sleeps for good,
  // and must wake it.
  const bool first_op = GENERATE(true, false);
  CAPTURE(size, first_op);
  REQUIRE_NOTHROW(run_ranks(size, [first_op](const Environment& env) {
    ::setenv("UCX_RNDV_THRESH", "8192", 1);
    auto c = world(env);
    const std::shared_ptr<Store> store = connect_store(env);
    if (!first_op) {
      check_ring(*c);  // starts the progress thread and leaves nothing in flight
      const std::optional<pid_t> progress = find_thread("cohort-progress");
      RANK_CHECK(progress, "not exactly one thread named cohort-progress");
      RANK_CHECK(wait_until_blocked(*progress, BlockedIn::ConditionVariableWithoutTimeout, 30s),
                 "the progress thread did not go to sleep without a timeout");
    }
    check_send_left_in_flight(*c, *store, first_op ? "first" : "fast", first_op ? 2 : 4);
    c->barrier();
  }));
}

TEST_CASE("send/recv: one thread waits on a receive while another sends on the same communicator",
          "[comm][multiproc]") {
  // Rank 0: thread A waits on a recv_async whose message rank 1 sends only after it received
  // everything thread B sends meanwhile (send_async and wait, 200 times, 1 MiB each: in flight
  // until rank 1's receive, by rendezvous or UCX, as A's receive is). A's wait polls its
  // receive as a driver of the communicator while B's ops take the fast path; the two must
  // never drive at once. Every message's values are checked. (With help() claiming the drive
  // without closing the fast path, the race this guards against did not show in 3 runs under
  // ThreadSanitizer: its window is narrow.)
  REQUIRE_NOTHROW(run_ranks(2, [](const Environment& env) {
    auto c = world(env);
    constexpr int kSends = 200;
    constexpr std::size_t kCount = 128 * 1024;  // 1 MiB of float64
    if (env.rank == 0) {
      Buffer last = Buffer::allocate(kCount, DType::Float64);
      std::thread waiter([&] {
        Work w = c->recv_async(last, 1, 9);
        w.wait();
      });
      for (int k = 0; k < kSends; ++k) {
        Work sent = c->send_async(message(0, 8, kCount), 1, 8);
        sent.wait();
      }
      waiter.join();
      expect_values(
          last, 0, kCount, [](std::size_t i) { return payload(1, 9, i); }, "rank 1's last");
    } else {
      Buffer in = Buffer::allocate(kCount, DType::Float64);
      for (int k = 0; k < kSends; ++k) {
        c->recv(in, 0, 8);
        expect_values(
            in, 0, kCount, [](std::size_t i) { return payload(0, 8, i); },
            "message " + std::to_string(k));
      }
      c->send(message(1, 9, kCount), 0, 9);
    }
    c->barrier();
  }));
}

TEST_CASE("send/recv: a receive called behind an unfinished allreduce_async is posted at once",
          "[comm][multiproc]") {
  // MPI's progress rule. Rank 0 starts an allreduce_async, then receives from every other rank
  // in turn a 2 MiB message (larger than any eager or shared-memory ring path: its send waits
  // for the receive) and a small one on the same tag; the others join the allreduce only after
  // both their sends ended. Rank 0's receives must be posted while its allreduce waits for
  // them: by the allreduce's own waits, in shared memory or on the message algorithm (Ring).
  // Posted after the allreduce, as before, every send waited out the 10 s deadline.
  const int size = GENERATE(2, 3, 4);
  const Algorithm algorithm = GENERATE(Algorithm::Auto, Algorithm::Ring);
  const bool blocking = GENERATE(true, false);
  CAPTURE(size, algorithm_name(algorithm), blocking);
  REQUIRE_NOTHROW(run_ranks(size, [algorithm, blocking](const Environment& env) {
    auto c = world(env);
    CollectiveOptions o;
    o.timeout = 10s;
    o.algorithm = algorithm;
    constexpr std::size_t kLarge = 256 * 1024, kSmall = 16;  // float64: 2 MiB, 128 B
    constexpr std::size_t kSummed = 100000;
    Buffer mine = Buffer::allocate(kSummed, DType::Int64);
    for (std::size_t i = 0; i < kSummed; ++i) set(mine, i, c->rank() + 1 + static_cast<int>(i % 5));
    Buffer sum = Buffer::allocate(kSummed, DType::Int64);
    if (env.rank == 0) {
      Work summed = c->allreduce_async(mine, sum, ReduceOp::Sum, o);
      for (int peer = 1; peer < c->size(); ++peer) {
        Buffer large = Buffer::allocate(kLarge, DType::Float64);
        Buffer small = Buffer::allocate(kSmall, DType::Float64);
        if (blocking) {
          c->recv(large, peer, 4, o);
          c->recv(small, peer, 4, o);
        } else {
          Work first = c->recv_async(large, peer, 4, o);
          Work second = c->recv_async(small, peer, 4, o);
          first.wait();
          second.wait();
        }
        // Same tag: the large one was sent first, so it must land in the first receive.
        expect_values(
            large, 0, kLarge, [&](std::size_t i) { return payload(peer, 4, i); },
            "the large message of rank " + std::to_string(peer));
        expect_values(
            small, 0, kSmall, [&](std::size_t i) { return payload(peer + 50, 4, i); },
            "the small message of rank " + std::to_string(peer));
      }
      summed.wait();
    } else {
      c->send(message(c->rank(), 4, kLarge), 0, 4, o);
      c->send(message(c->rank() + 50, 4, kSmall), 0, 4, o);
      c->allreduce(mine, sum, ReduceOp::Sum, o);
    }
    const int n = c->size();
    expect_values(
        sum, 0, kSummed,
        [n](std::size_t i) { return n * (n + 1) / 2 + n * static_cast<int>(i % 5); },
        "the allreduce");
    c->barrier();
  }));
}

TEST_CASE("send/recv: a send of what an unfinished allreduce_async writes waits for it",
          "[comm][multiproc]") {
  // Rank 0: allreduce_async in place on x, then send_async(x) to every other rank, which joins
  // the allreduce only once rank 0 has made those calls (a store key), then receives. The sends
  // are queued while the allreduce waits for them, but they read what it writes: they must wait
  // for it and carry the sum (posted from inside its waits, they carried rank 0's own values).
  // Either the allreduce on x runs while the sends are called, or it is still queued behind an
  // allreduce on another buffer.
  const int size = GENERATE(2, 3);
  const bool queued_behind_another = GENERATE(false, true);
  CAPTURE(size, queued_behind_another);
  REQUIRE_NOTHROW(run_ranks(size, [queued_behind_another](const Environment& env) {
    auto c = world(env);
    const std::shared_ptr<Store> store = connect_store(env);
    // 64 KiB: copied into the receiver's ring when posted (a "spread" message), so a send
    // posted early carries what x held then, whatever UCX's protocol choices.
    constexpr std::size_t kCount = 8192;
    const int n = c->size();
    const auto sum = [n](std::size_t i) { return n * (n - 1) / 2 + n * static_cast<int>(i % 7); };
    Buffer x = Buffer::allocate(kCount, DType::Int64);
    for (std::size_t i = 0; i < kCount; ++i) set(x, i, c->rank() + static_cast<int>(i % 7));
    Buffer other = Buffer::allocate(kCount, DType::Int64);
    for (std::size_t i = 0; i < kCount; ++i) set(other, i, 1);
    if (env.rank == 0) {
      std::optional<Work> first;
      if (queued_behind_another) first = c->allreduce_async(other, other, ReduceOp::Sum);
      Work summed = c->allreduce_async(x, x, ReduceOp::Sum);
      std::vector<Work> sends;
      for (int peer = 1; peer < n; ++peer) sends.push_back(c->send_async(x, peer, 3));
      store->set_string("p2p_test/send_of_sum/called", "1");
      if (first) first->wait();
      summed.wait();
      for (Work& w : sends) w.wait();
    } else {
      store->get_string("p2p_test/send_of_sum/called", 60s);
      if (queued_behind_another) c->allreduce(other, other, ReduceOp::Sum);
      c->allreduce(x, x, ReduceOp::Sum);
      Buffer got = Buffer::allocate(kCount, DType::Int64);
      c->recv(got, 0, 3);
      expect_values(got, 0, kCount, sum, "rank 0's x as sent");
    }
    expect_values(x, 0, kCount, sum, "the allreduce");
    c->barrier();
  }));
}

TEST_CASE("send/recv: a non-root's send of its reduce_async buffer is not held behind the reduce",
          "[comm][multiproc]") {
  // Every non-root calls reduce_async(g, g, Sum, root 0), then sends g (1 MiB: its send waits
  // for the receive) to rank 0, which receives them all before it joins the reduce. A non-root's
  // output is unused (the reduce reads g and writes nothing there), so the send may pass the
  // reduce; held behind it as if the reduce wrote g, every rank waited out the 10 s deadline.
  const int size = GENERATE(2, 3);
  CAPTURE(size);
  REQUIRE_NOTHROW(run_ranks(size, [](const Environment& env) {
    auto c = world(env);
    CollectiveOptions o;
    o.timeout = 10s;
    constexpr std::size_t kCount = 128 * 1024;  // float64: 1 MiB
    const int n = c->size();
    Buffer g = message(c->rank(), 2, kCount);
    if (env.rank == 0) {
      for (int peer = 1; peer < n; ++peer) {
        Buffer got = Buffer::allocate(kCount, DType::Float64);
        c->recv(got, peer, 2, o);
        expect_values(
            got, 0, kCount, [&](std::size_t i) { return payload(peer, 2, i); },
            "rank " + std::to_string(peer) + "'s g");
      }
      c->reduce(g, g, ReduceOp::Sum, 0, o);
      expect_values(
          g, 0, kCount,
          [&](std::size_t i) {
            double total = 0;
            for (int r = 0; r < n; ++r) total += payload(r, 2, i);
            return total;
          },
          "the reduce on the root");
    } else {
      Work reduced = c->reduce_async(g, g, ReduceOp::Sum, 0, o);
      Work sent = c->send_async(g, 0, 2, o);
      sent.wait();
      reduced.wait();
    }
    c->barrier();
  }));
}

TEST_CASE("send/recv: a receive that fails while an allreduce waits fails that allreduce too",
          "[comm][multiproc]") {
  // Rank 0's recv_async (300 ms deadline, never sent to) is posted and polled from inside its
  // allreduce_async's waits (10 s deadline; rank 1 joins it only after rank 0 reported). The
  // receive fails with its own Timeout, which poisons the communicator: the allreduce fails with
  // that cause instead of waiting out its own deadline. Posted after the allreduce, as before,
  // the allreduce failed with Timeout and the receive as unusable.
  REQUIRE_NOTHROW(run_ranks(2, [](const Environment& env) {
    auto c = world(env);
    const std::shared_ptr<Store> store = connect_store(env);
    CollectiveOptions slow;
    slow.timeout = 10s;
    Buffer b = Buffer::allocate(1000, DType::Float32);
    if (env.rank == 0) {
      Work summed = c->allreduce_async(b, b, ReduceOp::Sum, slow);
      CollectiveOptions quick;
      quick.timeout = 300ms;
      Buffer never = Buffer::allocate(8, DType::Float64);
      Work received = c->recv_async(never, 1, 6, quick);
      const Error lost =
          caught_error([&] { received.wait(); }, ErrorCode::Timeout,
                       {"recv #0 from rank 1 (tag 6): "}, "the receive nobody sends to");
      // Named by fields, though it failed inside the allreduce's wait: the bare op, its number,
      // the peer and the tag.
      expect_op(lost, "recv", 0, c->id(), "the receive nobody sends to");
      RANK_CHECK(lost.context().from_rank == 1 && !lost.context().to_rank,
                 "the receive's peer: " << lost.what());
      RANK_CHECK(lost.context().tag == 6, "the receive's tag: " << lost.what());
      RANK_CHECK(c->error() && c->error()->context().op == "recv",
                 "the communicator's cause: " << (c->error() ? c->error()->what() : "none"));
      const Error interrupted =
          caught_error([&] { summed.wait(); }, ErrorCode::InvalidUsage, {"allreduce", "recv #"},
                       "the allreduce that waited while it failed");
      expect_op(interrupted, "allreduce", 0, c->id(), "the allreduce that waited while it failed");
      store->set_string("p2p_test/failed_inside/reported", "1");
    } else {
      store->get_string("p2p_test/failed_inside/reported", 60s);
    }
  }));
}

TEST_CASE("sendrecv: a ring exchange at every size, behind an allreduce_async, and refusals",
          "[comm][multiproc]") {
  // Each rank sends to the next and receives from the previous in one call, at sizes that go
  // inline, spread through the ring and by rendezvous (a pair of blocking calls would deadlock
  // on the rendezvous ones). Then the same queued behind an unfinished allreduce_async (the
  // executor's queued pair). Bad arguments fail by name before anything moves, and
  // the communicator keeps working.
  const int size = GENERATE(2, 3, 5);
  CAPTURE(size);
  REQUIRE_NOTHROW(run_ranks(size, [](const Environment& env) {
    ::setenv("UCX_RNDV_THRESH", "8192", 1);
    auto c = world(env);
    const int n = c->size();
    const int next = (c->rank() + 1) % n;
    const int prev = (c->rank() + n - 1) % n;
    for (std::size_t count :
         {std::size_t{1}, std::size_t{500}, std::size_t{8192}, std::size_t{300000}}) {
      Buffer in = message(c->rank(), 6, count);
      Buffer out = Buffer::allocate(count, DType::Float64);
      c->sendrecv(in, next, out, prev, 6);
      expect_values(
          out, 0, count, [&](std::size_t i) { return payload(prev, 6, i); },
          "sendrecv of " + std::to_string(count) + " from rank " + std::to_string(prev));
      expect_values(
          in, 0, count, [&](std::size_t i) { return payload(c->rank(), 6, i); },
          "the input after it was sent");
    }
    // Behind an allreduce_async still waiting (rank 0 joins it only after its own sendrecv), so
    // every other rank's sendrecv is the executor's queued pair, posted from inside that
    // allreduce's waits.
    Buffer summed = Buffer::allocate(1000, DType::Int32);
    for (std::size_t i = 0; i < 1000; ++i) set(summed, i, 1);
    Buffer in = message(c->rank(), 8, 4000);
    Buffer out = Buffer::allocate(4000, DType::Float64);
    if (c->rank() == 0) {
      c->sendrecv(in, next, out, prev, 8);
      c->allreduce(summed, summed, ReduceOp::Sum);
    } else {
      Work w = c->allreduce_async(summed, summed, ReduceOp::Sum);
      c->sendrecv(in, next, out, prev, 8);
      w.wait();
    }
    expect_values(
        out, 0, 4000, [&](std::size_t i) { return payload(prev, 8, i); },
        "sendrecv behind an allreduce_async");
    expect_values(
        summed, 0, 1000, [&](std::size_t) { return n; }, "the allreduce");

    Buffer both = Buffer::allocate(100, DType::Float64);
    expect_error([&] { c->sendrecv(both, next, both, prev, 1); }, ErrorCode::InvalidArgument,
                 {"sendrecv", "overlap"}, "the same buffer both ways");
    expect_error([&] { c->sendrecv(in, n, out, prev, 1); }, ErrorCode::InvalidArgument,
                 {"send", "peer"}, "a destination outside the communicator");
    expect_error([&] { c->sendrecv(in, next, out, -1, 1); }, ErrorCode::InvalidArgument,
                 {"recv", "peer"}, "a negative source");
    expect_error([&] { c->sendrecv(in, next, out, prev, -2); }, ErrorCode::InvalidArgument, {"tag"},
                 "a negative tag");
    c->barrier();  // usable after the refusals
  }));
}

TEST_CASE("sendrecv: a half the peer never answers fails by its deadline, naming the pair",
          "[comm][multiproc]") {
  // Rank 0's sendrecv with rank 1 must fail with Timeout at its 300 ms deadline, naming the
  // receive from rank 1. Rank 1 takes the send but never sends back: 512 B or 512 KiB in one
  // transport wait (named as the pair). Or rank 1 does nothing at all, and rank 0's 512 KiB
  // sendrecv is queued behind an allreduce_async that rank 1 never joins: two transfers, the
  // send unfinished too (half of it waits for room in rank 1's ring), so the receive's Timeout
  // poisons the communicator and fails the send and the allreduce after it; the sendrecv must
  // report that first cause, not the send's failure that followed from it.
  const auto [size, count, behind] =
      GENERATE(std::tuple{2, std::size_t{64}, false}, std::tuple{3, std::size_t{65536}, false},
               std::tuple{2, std::size_t{65536}, true});
  CAPTURE(size, count, behind);
  REQUIRE_NOTHROW(run_ranks(size, [count = count, behind = behind](const Environment& env) {
    auto world_comm = world(env);
    auto c = world_comm->dup();
    Buffer in = message(env.rank, 9, count);
    Buffer out = Buffer::allocate(count, DType::Float64);
    if (env.rank == 0) {
      Buffer summed = Buffer::allocate(8, DType::Int32);
      Work ahead;
      if (behind) ahead = c->allreduce_async(summed, summed, ReduceOp::Sum);
      CollectiveOptions quick;
      quick.timeout = 300ms;
      const Error unanswered =
          caught_error([&] { c->sendrecv(in, 1, out, 1, 9, quick); }, ErrorCode::Timeout,
                       {"recv", "from rank 1"}, "the unanswered sendrecv");
      // In one wait the pair fails as the sendrecv; behind the allreduce it was posted as a
      // receive and a send, and fails with the receive's cause.
      expect_op(unanswered, behind ? "recv" : "sendrecv", 0, c->id(), "the unanswered sendrecv");
      RANK_CHECK(unanswered.context().from_rank == 1, "from_rank: " << unanswered.what());
      RANK_CHECK(unanswered.context().to_rank == (behind ? std::nullopt : std::optional<int>(1)),
                 "to_rank: " << unanswered.what());
      RANK_CHECK(unanswered.context().tag == 9, "tag: " << unanswered.what());
      if (!behind)
        RANK_CHECK(unanswered.message().rfind(
                       "sendrecv #0 (send to rank 1, recv from rank 1, tag 9): ", 0) == 0,
                   "named as the pair: " << unanswered.what());
      if (behind)
        expect_error([&] { ahead.wait(); }, ErrorCode::InvalidUsage,
                     {"interrupted by an earlier failure", "recv", "from rank 1"},
                     "the allreduce the sendrecv waited behind");
    } else if (env.rank == 1 && !behind) {
      c->recv(out, 0, 9);
      expect_values(
          out, 0, count, [](std::size_t i) { return payload(0, 9, i); }, "rank 0's half");
    }
    world_comm->barrier();
  }));
}

TEST_CASE("send/recv: ring, blocking in matching order, tags, mixed with collectives",
          "[comm][multiproc]") {
  const int size = GENERATE(2, 3, 5);
  CAPTURE(size);
  REQUIRE_NOTHROW(run_ranks(size, [](const Environment& env) {
    ::setenv("UCX_RNDV_THRESH", "8192", 1);
    auto c = world(env);
    check_ring(*c);
    check_matching_blocking(*c);
    check_tags_and_order(*c);
    check_mixed_with_collectives(*c);
    c->barrier();
  }));
}
