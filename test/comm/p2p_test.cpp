// send/recv: a ring with send_async + recv (no deadlock although sends may need the receive
// posted first), blocking calls in matching order, per-tag ordering, and mixing with collectives.

#include "rank_checks.hpp"

#include <catch2/catch.hpp>

#include <chrono>
#include <thread>
#include <vector>

namespace {

using namespace cohort;
using namespace cohort::test;

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

void check_first_op_left_in_flight(Communicator& c) {
  // The communicator's very first op is a rendezvous send whose receive is posted long after the
  // sender's Work::wait has stopped polling for itself and gone to sleep: only the progress
  // thread can finish it then.
  const int next = (c.rank() + 1) % c.size();
  const int prev = (c.rank() + c.size() - 1) % c.size();
  Buffer out = message(c.rank(), 2, 100000);
  Work sent = c.send_async(out, next, 2);
  Buffer in = Buffer::allocate(100000, DType::Float64);
  if (c.rank() % 2 == 1) {
    sent.wait();  // its receiver (even, or rank 0 when the size is odd) has not posted yet
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    c.recv(in, prev, 2);
  } else {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    c.recv(in, prev, 2);
    sent.wait();
  }
  expect_values(
      in, 0, 100000, [&](std::size_t i) { return payload(prev, 2, i); }, "delayed receive");
}

}  // namespace

TEST_CASE("send/recv: a send_async as the first op completes while its sender sleeps in wait",
          "[comm][multiproc]") {
  const int size = GENERATE(2, 3);
  CAPTURE(size);
  REQUIRE_NOTHROW(run_ranks(size, [](const Environment& env) {
    ::setenv("UCX_RNDV_THRESH", "8192", 1);
    auto c = world(env);
    check_first_op_left_in_flight(*c);
    c->barrier();
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
