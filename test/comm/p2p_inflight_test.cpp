// InFlightTransfers alone, over the world-of-one loopback transport (a send and a receive with
// the same tag match when the second is posted): transfers complete as they match, not in
// posting order; an unmatched one times out at its deadline naming its peer and tag; a transport
// error is reported; cancel_all() fails every Work with the cause; buffer owners are dropped on
// completion and never before the transport lets go of the buffer. Last, the executor's use of
// it: an in-flight failure poisons the executor and fails the other transfers with the cause.

#include "comm/p2p_inflight.hpp"
#include "comm/executor.hpp"
#include "transport/self_transport.hpp"

#include <cohort/error.hpp>
#include <cohort/work.hpp>

#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using namespace std::chrono_literals;
using cohort::Error;
using cohort::ErrorCode;
using cohort::comm::InFlightTransfers;
using cohort::comm::PointToPoint;
using cohort::comm::TransferFailure;
using cohort::detail::WorkState;
using cohort::transport::p2p_tag;
using cohort::transport::Request;
using cohort::transport::SelfTransport;
using Clock = std::chrono::steady_clock;

constexpr std::uint32_t kTagId = 5;

/// A transfer with rank 0 (the only one) whose buffer is owned by `owner`.
PointToPoint transfer(bool is_send, int tag, void* data, std::size_t bytes,
                      std::shared_ptr<void> owner) {
  PointToPoint p2p{is_send, 0, tag, data, bytes, {}};
  p2p.owner = std::move(owner);
  return p2p;
}

/// The Work state of "recv #seq from rank peer (tag tag)".
std::shared_ptr<WorkState> recv_state(std::uint32_t seq, int peer, int tag) {
  return std::make_shared<WorkState>(cohort::detail::PointToPointLabel{false, seq, peer, tag});
}

/// The Work state of "send #seq to rank peer (tag tag)".
std::shared_ptr<WorkState> send_state(std::uint32_t seq, int peer, int tag) {
  return std::make_shared<WorkState>(cohort::detail::PointToPointLabel{true, seq, peer, tag});
}

/// Posts through `transfers`, which must hold the transfer: SelfTransport finishes nothing at
/// post, so a Finished answer here would be a wrong one.
void hold(InFlightTransfers& transfers, PointToPoint&& p2p, std::chrono::milliseconds timeout,
          const std::shared_ptr<WorkState>& work) {
  REQUIRE(transfers.post(std::move(p2p), timeout, work) == InFlightTransfers::Posted::Held);
}

bool succeeded(const std::shared_ptr<WorkState>& state) {
  if (!state->finished) return false;
  cohort::Work(state).wait();  // rethrows the op's error, failing the test
  return true;
}

/// The error a finished Work failed with.
Error failure_of(const std::shared_ptr<WorkState>& state) {
  REQUIRE(state->finished);
  try {
    cohort::Work(state).wait();
  } catch (const Error& e) {
    return e;
  }
  FAIL("the Work succeeded");
  throw std::logic_error("unreachable");
}

Error unusable(const cohort::ErrorContext& op) {
  return Error(ErrorCode::InvalidUsage, "unusable after the cause", op);
}

/// Checks the transport holds no receive with tag `tag` any more: a send and a receive posted
/// now match each other, not an older receive.
void expect_no_receive_left(SelfTransport& t, int tag) {
  const std::int32_t out = 11;
  std::int32_t in = 0;
  const Request s =
      t.post_send(0, &out, sizeof out, p2p_tag(kTagId, static_cast<std::uint32_t>(tag)));
  const Request r =
      t.post_recv(0, &in, sizeof in, p2p_tag(kTagId, static_cast<std::uint32_t>(tag)));
  CHECK(t.test(s));
  CHECK(t.test(r));
  CHECK(in == 11);
}

}  // namespace

TEST_CASE("in-flight: a receive and a send complete, and their owners are dropped then",
          "[p2p_inflight]") {
  SelfTransport t;
  InFlightTransfers transfers(t, kTagId);
  const double out[3] = {1.5, -2.0, 4.25};
  double in[3] = {0, 0, 0};
  auto recv_owner = std::make_shared<int>(0), send_owner = std::make_shared<int>(0);
  const std::weak_ptr<int> recv_watch = recv_owner, send_watch = send_owner;
  const auto recv_work = recv_state(0, 0, 7);
  const auto send_work = send_state(1, 0, 7);

  hold(transfers, transfer(false, 7, in, sizeof in, std::move(recv_owner)), 10s, recv_work);
  CHECK(transfers.count() == 1);
  // Nothing to match yet: the receive stays in flight and keeps its buffer's owner.
  const auto idle = transfers.poll();
  CHECK(idle.completed == 0);
  CHECK_FALSE(idle.failure);
  CHECK_FALSE(recv_work->finished);
  CHECK_FALSE(recv_watch.expired());

  hold(transfers, transfer(true, 7, const_cast<double*>(out), sizeof out, std::move(send_owner)),
       10s, send_work);
  CHECK(transfers.count() == 2);
  const auto done = transfers.poll();
  CHECK(done.completed == 2);
  CHECK_FALSE(done.failure);
  CHECK(transfers.count() == 0);
  CHECK(succeeded(recv_work));
  CHECK(succeeded(send_work));
  CHECK(recv_watch.expired());
  CHECK(send_watch.expired());
  CHECK(in[0] == 1.5);
  CHECK(in[1] == -2.0);
  CHECK(in[2] == 4.25);
}

TEST_CASE("in-flight: messages carry the communicator's point-to-point tag", "[p2p_inflight]") {
  SelfTransport t;
  InFlightTransfers transfers(t, kTagId);
  const std::int64_t out = 77;
  std::int64_t wrong = 0, right = 0;
  // Same user tag on another communicator's tag id, and a collective's tag: neither matches.
  const Request other_comm = t.post_recv(0, &wrong, sizeof wrong, p2p_tag(kTagId + 1, 3));
  const Request collective =
      t.post_recv(0, &wrong, sizeof wrong, cohort::transport::op_tag(kTagId, 3, 0));
  const Request mine = t.post_recv(0, &right, sizeof right, p2p_tag(kTagId, 3));
  const auto send_work = send_state(0, 0, 3);
  hold(transfers, transfer(true, 3, const_cast<std::int64_t*>(&out), sizeof out, nullptr), 10s,
       send_work);
  CHECK(transfers.poll().completed == 1);
  CHECK(succeeded(send_work));
  CHECK(t.test(mine));
  CHECK(right == 77);
  CHECK_FALSE(t.test(other_comm));
  CHECK_FALSE(t.test(collective));
  CHECK(wrong == 0);
  t.cancel_all();
}

TEST_CASE("in-flight: transfers complete as they match, not in posting order", "[p2p_inflight]") {
  SelfTransport t;
  InFlightTransfers transfers(t, kTagId);
  std::int32_t first_in = 0, second_in = 0;
  const std::int32_t first_out = 1, second_out = 2;
  auto first_owner = std::make_shared<int>(0);
  const std::weak_ptr<int> first_watch = first_owner;
  const auto first = recv_state(0, 0, 1);
  const auto second = recv_state(1, 0, 2);
  const auto second_send = send_state(2, 0, 2);
  const auto first_send = send_state(3, 0, 1);

  hold(transfers, transfer(false, 1, &first_in, sizeof first_in, std::move(first_owner)), 10s,
       first);
  hold(transfers, transfer(false, 2, &second_in, sizeof second_in, nullptr), 10s, second);
  hold(transfers,
       transfer(true, 2, const_cast<std::int32_t*>(&second_out), sizeof second_out, nullptr), 10s,
       second_send);

  // The later receive and its send finish; the first receive, still unmatched, holds nobody up
  // and keeps its place (and its buffer's owner).
  const auto r = transfers.poll();
  CHECK(r.completed == 2);
  CHECK_FALSE(r.failure);
  CHECK(transfers.count() == 1);
  CHECK_FALSE(first->finished);
  CHECK(succeeded(second));
  CHECK(succeeded(second_send));
  CHECK(second_in == 2);
  CHECK_FALSE(first_watch.expired());

  hold(transfers,
       transfer(true, 1, const_cast<std::int32_t*>(&first_out), sizeof first_out, nullptr), 10s,
       first_send);
  CHECK(transfers.poll().completed == 2);
  CHECK(transfers.count() == 0);
  CHECK(succeeded(first));
  CHECK(succeeded(first_send));
  CHECK(first_in == 1);
  CHECK(first_watch.expired());
}

TEST_CASE("in-flight: a receive nobody matches times out at its deadline, naming peer and tag",
          "[p2p_inflight]") {
  SelfTransport t;
  InFlightTransfers transfers(t, kTagId);
  constexpr auto kTimeout = 20ms;
  std::int32_t in = 0;
  auto owner = std::make_shared<int>(0);
  const std::weak_ptr<int> watch = owner;
  const auto recv_work = recv_state(4, 0, 9);

  const auto start = Clock::now();
  hold(transfers, transfer(false, 9, &in, sizeof in, std::move(owner)), kTimeout, recv_work);
  // Poll until it fails; the bound only keeps a broken deadline from hanging the test.
  std::optional<TransferFailure> failure;
  bool failed_early = false;
  std::size_t completed = 0;
  while (!failure && Clock::now() < start + 10s) {
    const auto r = transfers.poll();
    // A poll that ended before start + timeout also began before the deadline: too early.
    if (r.failure && Clock::now() < start + kTimeout) failed_early = true;
    completed += r.completed;
    if (r.failure) failure = *r.failure;
  }
  CHECK_FALSE(failed_early);
  CHECK(completed == 0);
  REQUIRE(failure);
  CHECK(Clock::now() >= start + kTimeout);
  // Named by fields: the bare op, its number, the peer and the tag.
  CHECK(failure->op.op == "recv");
  CHECK(failure->op.sequence == 4u);
  CHECK(failure->op.from_rank == 0);
  CHECK_FALSE(failure->op.to_rank);
  CHECK(failure->op.tag == 9);
  CHECK(failure->error.context().op == "recv");
  CHECK(failure->error.context().sequence == 4u);
  CHECK(failure->error.context().from_rank == 0);
  CHECK(failure->error.context().tag == 9);
  CHECK(failure->error.code() == ErrorCode::Timeout);
  CHECK_THAT(failure->error.message(), Catch::StartsWith("recv #4 from rank 0 (tag 9): "));
  CHECK(failure->error.context().peers == std::vector<int>{0});
  CHECK_THAT(failure->error.message(), Catch::Contains("timed out after 20 ms"));
  CHECK_THAT(failure->error.message(), Catch::Contains("peers not heard from: 0 (tag 9)"));

  // Reported, not yet released: the transport may still write into the buffer.
  CHECK_FALSE(recv_work->finished);
  CHECK_FALSE(watch.expired());
  CHECK(transfers.count() == 1);
  // Later polls skip it rather than report it again.
  const auto again = transfers.poll();
  CHECK_FALSE(again.failure);
  CHECK(again.completed == 0);

  // The owner poisons with the failure: the Work fails with exactly that error.
  transfers.cancel_all(failure->error, unusable);
  CHECK(transfers.count() == 0);
  CHECK(watch.expired());
  const Error e = failure_of(recv_work);
  CHECK(e.code() == ErrorCode::Timeout);
  CHECK(e.message() == failure->error.message());
  expect_no_receive_left(t, 9);
}

TEST_CASE("in-flight: a transfer the transport fails is reported with the transport's error",
          "[p2p_inflight]") {
  SelfTransport t;
  InFlightTransfers transfers(t, kTagId);
  std::int32_t in = 0;
  const std::int64_t too_big = 5;
  const auto recv_work = recv_state(0, 0, 4);
  const auto later_work = recv_state(1, 0, 6);
  hold(transfers, transfer(false, 4, &in, sizeof in, nullptr), 10s, recv_work);
  hold(transfers, transfer(false, 6, &in, sizeof in, nullptr), 10s, later_work);
  // An 8-byte message for a 4-byte receive: the transport fails the receive.
  const Request s = t.post_send(0, &too_big, sizeof too_big, p2p_tag(kTagId, 4));
  CHECK(t.test(s));

  const auto r = transfers.poll();
  REQUIRE(r.failure);
  CHECK(cohort::format_context(r.failure->op) == "recv #0 from rank 0 (tag 4)");
  CHECK(r.failure->error.code() == ErrorCode::InvalidArgument);
  CHECK_THAT(r.failure->error.message(), Catch::Contains("8-byte message"));
  // Named as the transfer, whatever the transport called it.
  CHECK_THAT(r.failure->error.message(), Catch::StartsWith("recv #0 from rank 0 (tag 4): "));
  CHECK(r.failure->error.context().peers == std::vector<int>{0});
  CHECK(transfers.count() == 2);

  transfers.cancel_all(r.failure->error, unusable);
  CHECK(failure_of(recv_work).code() == ErrorCode::InvalidArgument);
  const Error later = failure_of(later_work);
  CHECK(later.code() == ErrorCode::InvalidUsage);
  CHECK(later.message() == "recv #1 from rank 0 (tag 6): unusable after the cause");
}

TEST_CASE("in-flight: cancel_all fails every pending Work and drops every owner",
          "[p2p_inflight]") {
  SelfTransport t;
  InFlightTransfers transfers(t, kTagId);
  std::int32_t a = 0, b = 0;
  const std::int32_t c = 3;
  std::weak_ptr<int> watches[3];
  std::shared_ptr<WorkState> works[3] = {recv_state(0, 0, 1), recv_state(1, 0, 2),
                                         send_state(2, 0, 3)};
  PointToPoint p2ps[3] = {transfer(false, 1, &a, sizeof a, nullptr),
                          transfer(false, 2, &b, sizeof b, nullptr),
                          transfer(true, 3, const_cast<std::int32_t*>(&c), sizeof c, nullptr)};
  for (int i = 0; i < 3; ++i) {
    auto owner = std::make_shared<int>(i);
    watches[i] = owner;
    p2ps[i].owner = std::move(owner);
    hold(transfers, std::move(p2ps[i]), 10s, works[i]);
  }
  CHECK(transfers.poll().completed == 0);
  CHECK(transfers.count() == 3);

  // A failure elsewhere (say a collective's): none of these failed itself, so each Work gets
  // the owner's error built from its own name.
  transfers.cancel_all(Error(ErrorCode::RemoteError, "rank 1 died"),
                       [](const cohort::ErrorContext& op) {
                         return Error(ErrorCode::InvalidUsage, "unusable after: rank 1 died", op);
                       });
  CHECK(transfers.count() == 0);
  for (int i = 0; i < 3; ++i) {
    CAPTURE(i);
    CHECK(watches[i].expired());
    const Error e = failure_of(works[i]);
    CHECK(e.code() == ErrorCode::InvalidUsage);
    CHECK_THAT(e.message(), Catch::StartsWith(works[i]->what()));
    CHECK_THAT(e.message(), Catch::Contains("rank 1 died"));
  }
  // Cancelled at the transport too: nothing left there to match.
  expect_no_receive_left(t, 1);
  expect_no_receive_left(t, 2);
  std::int32_t in = 0;
  const Request r = t.post_recv(0, &in, sizeof in, p2p_tag(kTagId, 3));
  CHECK_FALSE(t.test(r));
  t.cancel_all();
}

TEST_CASE("in-flight: a failed post holds nothing and leaves the Work alone", "[p2p_inflight]") {
  SelfTransport t;
  InFlightTransfers transfers(t, kTagId);
  std::int32_t in = 0;
  PointToPoint p2p = transfer(false, 1, &in, sizeof in, std::make_shared<int>(0));
  p2p.peer = 1;  // out of range in a world of one
  const auto recv_work = recv_state(0, 1, 1);
  try {
    static_cast<void>(transfers.post(std::move(p2p), 10s, recv_work));
    FAIL("a receive from rank 1 was posted in a world of one");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::InvalidArgument);
  }
  CHECK(transfers.count() == 0);
  CHECK_FALSE(recv_work->finished);
  CHECK(p2p.owner != nullptr);  // NOLINT(bugprone-use-after-move): untouched on failure
}

TEST_CASE("in-flight: the blocking form waits for its one transfer", "[p2p_inflight]") {
  SelfTransport t;
  InFlightTransfers transfers(t, kTagId);
  const std::int32_t out = 42;
  std::int32_t in = 0;
  const Request r = t.post_recv(0, &in, sizeof in, p2p_tag(kTagId, 8));
  transfers.run_blocking(transfer(true, 8, const_cast<std::int32_t*>(&out), sizeof out, nullptr),
                         Clock::now() + 10s, "send #0 to rank 0 (tag 8)");
  CHECK(transfers.count() == 0);
  CHECK(t.test(r));
  CHECK(in == 42);

  // Nothing will ever match this one; the loopback transport says so at once.
  try {
    transfers.run_blocking(transfer(false, 8, &in, sizeof in, nullptr), Clock::now() + 10s,
                           "recv #1 from rank 0 (tag 8)");
    FAIL("a receive nobody sends to completed");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::Timeout);
    CHECK_THAT(e.message(), Catch::Contains("recv #1 from rank 0 (tag 8)"));
  }
  CHECK(transfers.count() == 0);
  t.cancel_all();
}

TEST_CASE("in-flight: going away with transfers in flight cancels them and fails their Works",
          "[p2p_inflight]") {
  SelfTransport t;
  std::int32_t in = 0;
  auto owner = std::make_shared<int>(0);
  const std::weak_ptr<int> watch = owner;
  const auto recv_work = recv_state(0, 0, 5);
  {
    InFlightTransfers transfers(t, kTagId);
    hold(transfers, transfer(false, 5, &in, sizeof in, std::move(owner)), 10s, recv_work);
  }
  CHECK(watch.expired());
  const Error e = failure_of(recv_work);
  CHECK(e.code() == ErrorCode::InvalidUsage);
  CHECK_THAT(e.message(), Catch::Contains("recv #0 from rank 0 (tag 5)"));
  expect_no_receive_left(t, 5);
}

TEST_CASE("in-flight, in the executor: a failed receive poisons, failing the other transfers",
          "[p2p_inflight]") {
  SelfTransport t;
  cohort::comm::Executor executor(t, nullptr, nullptr, 0, 1, 0, kTagId);
  const std::int32_t out = 3;
  std::int32_t in = 0;
  const std::chrono::milliseconds long_wait = 10s, short_wait = 50ms;
  // A send and a receive on different tags: neither ever matches.
  const cohort::Work send = executor.submit_p2p(
      long_wait, transfer(true, 2, const_cast<std::int32_t*>(&out), sizeof out, nullptr));
  const cohort::Work recv =
      executor.submit_p2p(short_wait, transfer(false, 1, &in, sizeof in, nullptr));

  try {
    recv.wait();
    FAIL("a receive nobody sends to completed");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::Timeout);
    CHECK_THAT(e.message(), Catch::StartsWith("recv #1 from rank 0 (tag 1): "));
    CHECK_THAT(e.message(), Catch::Contains("timed out after 50 ms"));
    CHECK_THAT(e.message(), Catch::Contains("peers not heard from: 0 (tag 1)"));
  }
  // Its failure poisoned the executor: the send still in flight fails without waiting for its
  // own deadline, naming itself and the cause, and so does every later op.
  try {
    send.wait(5s);
    FAIL("the send still in flight completed");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::InvalidUsage);
    CHECK_THAT(e.message(), Catch::StartsWith("send #0 to rank 0 (tag 2): "));
    CHECK_THAT(e.message(), Catch::Contains("timed out after 50 ms"));
  }
  try {
    executor.submit_p2p(long_wait, transfer(false, 3, &in, sizeof in, nullptr));
    FAIL("a poisoned executor took a receive");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::InvalidUsage);
    CHECK_THAT(e.message(), Catch::Contains("timed out after 50 ms"));
  }
}

TEST_CASE("a Work is named from its label when asked", "[p2p_inflight]") {
  CHECK(WorkState(cohort::detail::PointToPointLabel{true, 3, 1, 7}).what() ==
        "send #3 to rank 1 (tag 7)");
  CHECK(WorkState(cohort::detail::PointToPointLabel{false, 4, 0, 0}).what() ==
        "recv #4 from rank 0 (tag 0)");
  using cohort::Algorithm;
  using cohort::Collective;
  CHECK(WorkState(cohort::detail::CollectiveLabel{Collective::Allreduce, 17, Algorithm::Auto})
            .what() == "allreduce #17");
  CHECK(WorkState(cohort::detail::CollectiveLabel{Collective::Broadcast, 2, Algorithm::Ring})
            .what() == "broadcast #2 (ring)");
  // The context's fields, which code may switch on: the bare op, never its label.
  const cohort::ErrorContext send =
      WorkState(cohort::detail::PointToPointLabel{true, 3, 1, 7}).context();
  CHECK(send.op == "send");
  CHECK(send.sequence == 3u);
  CHECK(send.to_rank == 1);
  CHECK_FALSE(send.from_rank);
  CHECK(send.tag == 7);
  const cohort::ErrorContext reduce =
      WorkState(cohort::detail::CollectiveLabel{Collective::Reduce, 9, Algorithm::Ring}).context();
  CHECK(reduce.op == "reduce");
  CHECK(reduce.sequence == 9u);
  CHECK(reduce.algorithm == "ring");
  CHECK_FALSE(reduce.tag);
}
