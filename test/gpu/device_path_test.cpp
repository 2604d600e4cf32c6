// The GPU path's own logic on CPU: each rank installs the device runtime's test double
// (fake_device_runtime.hpp), whose "device memory" is host memory and whose NCCL moves data
// through the job's real store, then drives a real Communicator (real processes, sockets, UCX)
// with buffers viewed as cuda:0. Expected values are computed here by hand.

#include "../comm/rank_checks.hpp"
#include "fake_device_runtime.hpp"
#include "support/blocked_thread.hpp"
#include "transport/tag_ids.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <future>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace cohort;
using namespace cohort::test;
using Clock = std::chrono::steady_clock;

/// This rank's fake runtime, installed for the process (each rank is its own process).
std::shared_ptr<FakeDeviceRuntime> install_fake(const Environment& env, int devices = 1) {
  auto fake = std::make_shared<FakeDeviceRuntime>(connect_store(env), devices);
  gpu::install_device_runtime(fake);
  return fake;
}

/// `count` elements of fake device memory on `device`, zeroed, seen as a CUDA buffer.
Buffer device_buffer(FakeDeviceRuntime& fake, std::size_t count, DType dtype, int device = 0) {
  const std::size_t bytes = std::max<std::size_t>(1, count * dtype_size(dtype));
  void* p = fake.allocate_device(bytes, device);
  std::memset(p, 0, bytes);
  auto owner = std::shared_ptr<void>(p, [&fake](void* q) { fake.free_device(q); });
  return Buffer::view(p, {static_cast<std::int64_t>(count)}, dtype, Device::cuda(device), {}, 0,
                      owner);
}

std::size_t count_calls(const FakeDeviceRuntime& fake, std::string_view prefix) {
  const auto calls = fake.calls();
  return static_cast<std::size_t>(std::count_if(calls.begin(), calls.end(), [&](const auto& c) {
    return std::string_view(c).substr(0, prefix.size()) == prefix;
  }));
}

/// Waits (up to 30 s) until the fake logged a call starting with `prefix`: another thread of
/// this rank reached it. A poll every millisecond: the fake announces nothing.
void await_call(const FakeDeviceRuntime& fake, std::string_view prefix) {
  const auto until = Clock::now() + std::chrono::seconds(30);
  while (count_calls(fake, prefix) == 0 && Clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

void every_collective(const Environment& env) {
  auto fake = install_fake(env);
  auto comm = world(env);
  const int rank = comm->rank();
  const int n = comm->size();
  const auto un = static_cast<std::size_t>(n);

  // allreduce, in and out of place: sum of (rank + 1) * (i + 1) = (i + 1) * n(n+1)/2.
  const std::size_t count = 37;
  Buffer in = device_buffer(*fake, count, DType::Float32);
  Buffer out = device_buffer(*fake, count, DType::Float32);
  for (std::size_t i = 0; i < count; ++i) set(in, i, double(rank + 1) * double(i + 1));
  comm->allreduce(in, out, ReduceOp::Sum);
  expect_values(
      out, 0, count, [&](std::size_t i) { return double(i + 1) * n * (n + 1) / 2; }, "allreduce");
  RANK_CHECK(count_calls(*fake, "allreduce count=37 dtype=float op=sum") == 1,
             "allreduce did not reach NCCL once");
  RANK_CHECK(count_calls(*fake, "unique_id") == (rank == 0 ? 1u : 0u),
             "unique id on rank " << rank);
  RANK_CHECK(count_calls(*fake, "init") == 1, "NCCL set up more than once");
  comm->allreduce(in, ReduceOp::Max);
  expect_values(
      in, 0, count, [&](std::size_t i) { return double(n) * double(i + 1); }, "in-place max");

  // The same communicator still runs host buffers on the host path.
  const std::size_t before = fake->calls().size();
  Buffer host = Buffer::allocate(4, DType::Int64);
  for (std::size_t i = 0; i < 4; ++i) set(host, i, rank);
  comm->allreduce(host, ReduceOp::Sum);
  expect_values(
      host, 0, 4, [&](std::size_t) { return double(n * (n - 1) / 2); }, "host allreduce");
  RANK_CHECK(fake->calls().size() == before, "a host op touched the device runtime");

  // broadcast from the last rank; reduce to rank 0 (Avg).
  Buffer b = device_buffer(*fake, 5, DType::Int32);
  if (rank == n - 1)
    for (std::size_t i = 0; i < 5; ++i) set(b, i, 100 + double(i));
  comm->broadcast(b, n - 1);
  expect_values(
      b, 0, 5, [](std::size_t i) { return 100.0 + double(i); }, "broadcast");
  Buffer r = device_buffer(*fake, 3, DType::Float64);
  for (std::size_t i = 0; i < 3; ++i) set(r, i, double(rank) * 2);
  Buffer r_out = rank == 0 ? device_buffer(*fake, 3, DType::Float64) : Buffer();
  comm->reduce(r, r_out, ReduceOp::Avg, 0);
  if (rank == 0)
    expect_values(
        r_out, 0, 3, [&](std::size_t) { return double(n - 1); }, "reduce avg");

  // allgather (native) and allgatherv (grouped send/recv): rank r gives r + 1 elements = r.
  Buffer g_in = device_buffer(*fake, 2, DType::Int64);
  set(g_in, 0, rank);
  set(g_in, 1, rank * 10);
  Buffer g_out = device_buffer(*fake, 2 * un, DType::Int64);
  comm->allgather(g_in, g_out);
  expect_values(
      g_out, 0, 2 * un,
      [](std::size_t i) { return i % 2 == 0 ? double(i / 2) : double(i / 2) * 10; }, "allgather");
  std::vector<std::size_t> counts(un);
  for (std::size_t q = 0; q < un; ++q) counts[q] = q + 1;
  const std::size_t total = un * (un + 1) / 2;
  Buffer v_in = device_buffer(*fake, static_cast<std::size_t>(rank) + 1, DType::Int32);
  for (std::size_t i = 0; i <= static_cast<std::size_t>(rank); ++i) set(v_in, i, rank);
  Buffer v_out = device_buffer(*fake, total, DType::Int32);
  fake->clear_calls();
  comm->allgatherv(v_in, v_out, counts);
  std::vector<double> want_v;
  for (int q = 0; q < n; ++q) want_v.insert(want_v.end(), static_cast<std::size_t>(q) + 1, q);
  expect_values(
      v_out, 0, total, [&](std::size_t i) { return want_v[i]; }, "allgatherv");
  RANK_CHECK(count_calls(*fake, "group_start") == 1 && count_calls(*fake, "group_end") == 1,
             "allgatherv is not one group");
  RANK_CHECK(count_calls(*fake, "send") == un - 1 && count_calls(*fake, "recv") == un - 1,
             "allgatherv sends/recvs");

  // gatherv to rank 0 and scatterv from rank 0 with the same counts.
  Buffer gv_out = rank == 0 ? device_buffer(*fake, total, DType::Int32) : Buffer();
  comm->gatherv(v_in, gv_out, counts, 0);
  if (rank == 0)
    expect_values(
        gv_out, 0, total, [&](std::size_t i) { return want_v[i]; }, "gatherv");
  Buffer sv_in = rank == 0 ? device_buffer(*fake, total, DType::Int32) : Buffer();
  if (rank == 0)
    for (std::size_t i = 0; i < total; ++i) set(sv_in, i, want_v[i] + 7);
  Buffer sv_out = device_buffer(*fake, static_cast<std::size_t>(rank) + 1, DType::Int32);
  comm->scatterv(sv_in, sv_out, counts, 0);
  expect_values(
      sv_out, 0, static_cast<std::size_t>(rank) + 1, [&](std::size_t) { return rank + 7.0; },
      "scatterv");

  // reduce_scatter: block q of rank r's input holds r + q; block `rank` of the sum is
  // n * rank + n(n-1)/2.
  Buffer rs_in = device_buffer(*fake, 3 * un, DType::Float32);
  for (std::size_t i = 0; i < 3 * un; ++i) set(rs_in, i, rank + double(i / 3));
  Buffer rs_out = device_buffer(*fake, 3, DType::Float32);
  comm->reduce_scatter(rs_in, rs_out, ReduceOp::Sum);
  expect_values(
      rs_out, 0, 3, [&](std::size_t) { return double(n * rank + n * (n - 1) / 2); },
      "reduce_scatter");

  // alltoall: element j of rank r's input is 100 r + j; rank r receives 100 q + r from q.
  Buffer a_in = device_buffer(*fake, un, DType::Int32);
  Buffer a_out = device_buffer(*fake, un, DType::Int32);
  for (std::size_t j = 0; j < un; ++j) set(a_in, j, 100 * rank + double(j));
  comm->alltoall(a_in, a_out);
  expect_values(
      a_out, 0, un, [&](std::size_t q) { return 100.0 * double(q) + rank; }, "alltoall");

  // send/recv around a ring, then a device barrier on a given stream.
  if (n > 1) {
    Buffer s = device_buffer(*fake, 4, DType::Int64);
    Buffer rcv = device_buffer(*fake, 4, DType::Int64);
    for (std::size_t i = 0; i < 4; ++i) set(s, i, rank * 1000 + double(i));
    Work w = comm->send_async(s, (rank + 1) % n, 0);
    comm->recv(rcv, (rank + n - 1) % n, 0);
    w.wait();
    const int from = (rank + n - 1) % n;
    expect_values(
        rcv, 0, 4, [&](std::size_t i) { return from * 1000.0 + double(i); }, "recv");
    // sendrecv around the same ring, one call per rank: both halves in one NCCL group (an
    // ungrouped receive blocks the fake, as NCCL's stream, until the peer's send is queued, and
    // every rank's receive came before its send).
    Buffer back = device_buffer(*fake, 4, DType::Int64);
    fake->clear_calls();
    comm->sendrecv(s, (rank + 1) % n, back, from, 2);
    expect_values(
        back, 0, 4, [&](std::size_t i) { return from * 1000.0 + double(i); }, "sendrecv");
    RANK_CHECK(count_calls(*fake, "group_start") == 1 && count_calls(*fake, "group_end") == 1,
               "sendrecv's halves were not one NCCL group");
    Buffer host = Buffer::allocate(4, DType::Int64);
    expect_error([&] { comm->sendrecv(s, (rank + 1) % n, host, from, 2); },
                 ErrorCode::InvalidArgument, {"sendrecv", "cuda:0", "host"},
                 "device input, host output");
  }
  const gpu::StreamHandle stream = fake->create_stream();
  CollectiveOptions on_stream;
  on_stream.stream = Stream{stream.bits};
  fake->clear_calls();
  comm->barrier(on_stream);
  RANK_CHECK(count_calls(*fake, "allreduce count=1 dtype=int32") == 1, "barrier is not NCCL's");
  RANK_CHECK(fake->last_op_stream() == stream, "barrier not queued on the given stream");
  comm->barrier();  // no stream: the host path
  RANK_CHECK(count_calls(*fake, "allreduce") == 1, "a host barrier reached NCCL");
}

TEST_CASE("every collective on device buffers runs on NCCL with the right data", "[gpu]") {
  for (int size : {1, 2, 3, 4}) REQUIRE_NOTHROW(run_ranks(size, every_collective));
}

void refusals(const Environment& env) {
  auto fake = install_fake(env, 2);
  auto comm = world(env);
  Buffer d = device_buffer(*fake, 8, DType::Float32);
  Buffer h = Buffer::allocate(8, DType::Float32);
  expect_error([&] { comm->allreduce(d, h, ReduceOp::Sum); }, ErrorCode::InvalidArgument,
               {"cuda:0", "cpu"}, "host and device mixed");
  Buffer i16 = device_buffer(*fake, 8, DType::Int16);
  expect_error([&] { comm->allreduce(i16, ReduceOp::Sum); }, ErrorCode::Unsupported, {"int16"},
               "int16");
  Buffer i32 = device_buffer(*fake, 8, DType::Int32);
  expect_error([&] { comm->allreduce(i32, ReduceOp::BXor); }, ErrorCode::Unsupported,
               {"bxor", "int32"}, "bitwise");
  expect_error([&] { comm->allreduce(i32, ReduceOp::Avg); }, ErrorCode::Unsupported, {"avg"},
               "integer avg");
  fake->set_nccl_version(22304);
  Buffer fp8 = device_buffer(*fake, 8, DType::Float8E4M3);
  expect_error([&] { comm->allreduce(fp8, ReduceOp::Sum); }, ErrorCode::Unsupported,
               {"2.24", "2.23.4"}, "fp8 on old NCCL");
  fake->set_nccl_version(22809);
  Buffer same = device_buffer(*fake, 2 * static_cast<std::size_t>(comm->size()), DType::Int32);
  expect_error([&] { comm->alltoall(same, same); }, ErrorCode::InvalidArgument, {"in-place"},
               "in-place alltoall");
  RANK_CHECK(fake->calls().empty(), "a refused op reached the runtime: " << fake->calls().front());

  // The communicator is still usable; the first GPU op binds cuda:0, then cuda:1 is refused.
  // The application's current device (cuda:1 here) is the same after the op as before.
  fake->set_device(1);
  comm->allreduce(d, ReduceOp::Sum);
  RANK_CHECK(fake->current_device() == 1,
             "the op left cuda:" << fake->current_device() << " current, not the caller's cuda:1");
  Buffer other = device_buffer(*fake, 8, DType::Float32, 1);
  expect_error([&] { comm->allreduce(other, ReduceOp::Sum); }, ErrorCode::InvalidArgument,
               {"cuda:1", "cuda:0"}, "second device");
  RANK_CHECK(!comm->is_poisoned(), "a refusal poisoned the communicator");
  comm->allreduce(d, ReduceOp::Sum);

  // No device visible: Unsupported, naming the reason.
  fake->set_device_count(0);
  expect_error([&] { comm->allreduce(d, ReduceOp::Sum); }, ErrorCode::Unsupported,
               {"no CUDA device"}, "no device");
  fake->set_device_count(2);
  comm->barrier();
}

TEST_CASE("device-path refusals happen before anything is queued and leave it usable", "[gpu]") {
  for (int size : {1, 3}) REQUIRE_NOTHROW(run_ranks(size, refusals));
}

/// COHORT_DEBUG=detail on device buffers: the last rank passes 4 elements where the others pass
/// 8, then rank 0 passes an empty host buffer (which takes the host path) where the others
/// pass 8 on the device. Both are InvalidArgument on every rank naming the counts,
/// with nothing queued on a device; then matching ops run.
void debug_detail_on_device(const Environment& env) {
  ::setenv("COHORT_DEBUG", "detail", 1);
  auto fake = install_fake(env);
  auto comm = world(env);
  const int last = comm->size() - 1;
  Buffer d = device_buffer(*fake, env.rank == last ? 4 : 8, DType::Float32);
  fake->clear_calls();
  expect_error([&] { comm->allreduce(d, ReduceOp::Sum); }, ErrorCode::InvalidArgument,
               {"rank 0 has count=8", "rank " + std::to_string(last) + " has count=4"},
               "count mismatch on device buffers");
  RANK_CHECK(count_calls(*fake, "nccl") == 0,
             "a disagreeing op reached NCCL: " << fake->calls().front());
  Buffer eight = device_buffer(*fake, 8, DType::Float32);
  const Buffer empty = Buffer::view(static_cast<void*>(nullptr), std::vector<std::int64_t>{0},
                                    DType::Float32, Device::cpu());
  expect_error([&] { comm->allreduce(env.rank == 0 ? empty : eight, ReduceOp::Sum); },
               ErrorCode::InvalidArgument, {"rank 0 has count=0", "rank 1 has count=8"},
               "an empty buffer on the host path against device buffers");
  RANK_CHECK(count_calls(*fake, "nccl") == 0,
             "a disagreeing op reached NCCL: " << fake->calls().front());
  RANK_CHECK(!comm->is_poisoned(), "a mismatch poisoned the communicator");
  // Equal counts, but rank 0's buffer is host memory: it would run the host algorithms while
  // the others queue NCCL, each waiting for the other's messages. The path is compared too.
  CollectiveOptions quick;
  quick.timeout = std::chrono::seconds(10);
  Buffer host_eight = Buffer::allocate(8, DType::Float32);
  expect_error([&] { comm->allreduce(env.rank == 0 ? host_eight : eight, ReduceOp::Sum, quick); },
               ErrorCode::InvalidArgument,
               {"rank 0 passed host buffers", "rank 1 passed device buffers"},
               "host buffers on rank 0, device buffers on the others");
  RANK_CHECK(count_calls(*fake, "nccl") == 0,
             "a disagreeing op reached NCCL: " << fake->calls().front());
  RANK_CHECK(!comm->is_poisoned(), "a path mismatch poisoned the communicator");
  // Every rank passes 0 elements, rank 0 on the host (the host path), the others on the device:
  // they agree, and every rank's op takes one number, so the next op still pairs up.
  const Buffer zero_on_device =
      Buffer::view(eight.data(), std::vector<std::int64_t>{0}, DType::Float32, Device::cuda(0));
  comm->allreduce(env.rank == 0 ? empty : zero_on_device, ReduceOp::Sum);
  // And with a host algorithm forced on every rank, which the device path does not run.
  CollectiveOptions ring;
  ring.algorithm = Algorithm::Ring;
  comm->allreduce(env.rank == 0 ? empty : zero_on_device, ReduceOp::Sum, ring);
  const auto check_sum = [&](const char* what) {
    const float want = static_cast<float>(comm->size() * (comm->size() - 1) / 2);
    for (std::size_t i = 0; i < 8; ++i)
      RANK_CHECK(eight.data_as<float>()[i] == want,
                 what << ": element " << i << " is " << eight.data_as<float>()[i]);
  };
  for (std::size_t i = 0; i < 8; ++i) eight.data_as<float>()[i] = static_cast<float>(env.rank);
  comm->allreduce(eight, ReduceOp::Sum);
  check_sum("allreduce after the mismatches and the empty op");
  // *_async ones are compared too (then they wait for their peers' calls), and a rank calling
  // the blocking form pairs with one calling the async form.
  for (std::size_t i = 0; i < 8; ++i) eight.data_as<float>()[i] = static_cast<float>(env.rank);
  if (env.rank == 0)
    comm->allreduce(eight, ReduceOp::Sum);
  else
    comm->allreduce_async(eight, eight, ReduceOp::Sum).wait();
  check_sum("allreduce on rank 0, allreduce_async elsewhere");
  for (std::size_t i = 0; i < 8; ++i) eight.data_as<float>()[i] = static_cast<float>(env.rank);
  Buffer short_one = device_buffer(*fake, env.rank == last ? 4 : 8, DType::Float32);
  expect_error([&] { comm->allreduce_async(short_one, short_one, ReduceOp::Sum).wait(); },
               ErrorCode::InvalidArgument, {"count=4"}, "count mismatch in allreduce_async");
  comm->allreduce_async(env.rank == 0 ? empty : zero_on_device, empty, ReduceOp::Sum).wait();
  for (std::size_t i = 0; i < 8; ++i) eight.data_as<float>()[i] = static_cast<float>(env.rank);
  comm->allreduce(eight, ReduceOp::Sum);
  check_sum("allreduce after an empty allreduce_async");
  ::unsetenv("COHORT_DEBUG");
}

TEST_CASE("COHORT_DEBUG=detail compares device ops' arguments across ranks", "[gpu]") {
  for (int size : {2, 3}) REQUIRE_NOTHROW(run_ranks(size, debug_detail_on_device));
}

/// A rank with nothing to send or receive in a v-collective passes empty CUDA tensors, which
/// have no data pointer (torch.empty(0, device="cuda").data_ptr() is 0). Such a rank must take
/// the device path with its peers: on the host path it would wait for messages the peers send
/// over NCCL (or none at all). Rank 1 holds nothing in each op; the others hold rank + 1
/// elements of value 10 * rank + element index. A short deadline turns a hang into an error.
void empty_cuda_tensors_without_data(const Environment& env) {
  auto fake = install_fake(env);
  auto comm = world(env);
  const int rank = comm->rank();
  const auto un = static_cast<std::size_t>(comm->size());
  CollectiveOptions quick;
  quick.timeout = std::chrono::seconds(10);
  const Buffer no_data = Buffer::view(static_cast<void*>(nullptr), std::vector<std::int64_t>{0},
                                      DType::Int32, Device::cuda(0));
  std::vector<std::size_t> counts(un), displs(un);
  std::size_t total = 0;
  for (std::size_t r = 0; r < un; ++r) {
    counts[r] = r == 1 ? 0 : r + 1;
    displs[r] = total;
    total += counts[r];
  }
  const auto want = [&](std::size_t i) {
    std::size_t r = un - 1;
    while (displs[r] > i || counts[r] == 0) --r;
    return 10.0 * double(r) + double(i - displs[r]);
  };
  const auto mine = [&] {
    if (rank == 1) return no_data;
    Buffer b = device_buffer(*fake, counts[static_cast<std::size_t>(rank)], DType::Int32);
    for (std::size_t i = 0; i < counts[static_cast<std::size_t>(rank)]; ++i)
      set(b, i, 10.0 * rank + double(i));
    return b;
  };

  // gatherv to rank 0 (rank 1, not the root, passes nothing but the empty tensor).
  const Buffer gv_in = mine();
  Buffer gv_out = rank == 0 ? device_buffer(*fake, total, DType::Int32) : Buffer();
  comm->gatherv(gv_in, gv_out, counts, 0, quick);
  if (rank == 0) expect_values(gv_out, 0, total, want, "gatherv with an empty rank");

  // scatterv from rank 0: rank 1 receives into the empty tensor.
  Buffer sv_in = rank == 0 ? device_buffer(*fake, total, DType::Int32) : Buffer();
  if (rank == 0)
    for (std::size_t i = 0; i < total; ++i) set(sv_in, i, want(i));
  const Buffer sv_out =
      rank == 1 ? no_data
                : device_buffer(*fake, counts[static_cast<std::size_t>(rank)], DType::Int32);
  comm->scatterv(sv_in, sv_out, counts, 0, quick);
  if (rank != 1)
    expect_values(
        sv_out, 0, counts[static_cast<std::size_t>(rank)],
        [&](std::size_t i) { return 10.0 * rank + double(i); }, "scatterv with an empty rank");

  // alltoallv: every rank but 1 sends each other such rank one element, 100 * from + to;
  // rank 1 sends and receives nothing, both of its tensors empty.
  std::vector<std::size_t> pair_counts(un, 1);
  pair_counts[1] = 0;
  if (rank == 1) std::fill(pair_counts.begin(), pair_counts.end(), 0);
  const std::size_t pairs = rank == 1 ? 0 : un - 1;
  const Buffer a_in = rank == 1 ? no_data : device_buffer(*fake, pairs, DType::Int32);
  const Buffer a_out = rank == 1 ? no_data : device_buffer(*fake, pairs, DType::Int32);
  std::vector<int> peers;  // the ranks this one exchanges with, in rank order
  for (int r = 0; r < comm->size(); ++r)
    if (r != 1) peers.push_back(r);
  if (rank != 1)
    for (std::size_t k = 0; k < peers.size(); ++k) set(a_in, k, 100.0 * rank + peers[k]);
  comm->alltoallv(a_in, pair_counts, a_out, pair_counts, quick);
  if (rank != 1)
    expect_values(
        a_out, 0, pairs, [&](std::size_t k) { return 100.0 * peers[k] + rank; },
        "alltoallv with an empty rank");

  // The ops paired up: a host op and a device op after them agree on every rank.
  Buffer host = Buffer::allocate(3, DType::Int64);
  for (std::size_t i = 0; i < 3; ++i) set(host, i, rank);
  comm->allreduce(host, ReduceOp::Sum, quick);
  const double ranks_sum = double(un * (un - 1) / 2);
  expect_values(
      host, 0, 3, [&](std::size_t) { return ranks_sum; }, "host allreduce afterwards");
  Buffer dev = device_buffer(*fake, 3, DType::Int32);
  for (std::size_t i = 0; i < 3; ++i) set(dev, i, rank);
  comm->allreduce(dev, ReduceOp::Sum, quick);
  expect_values(
      dev, 0, 3, [&](std::size_t) { return ranks_sum; }, "device allreduce afterwards");
}

TEST_CASE("a rank whose CUDA tensors are empty and without data takes the device path", "[gpu]") {
  for (int size : {2, 3, 4}) REQUIRE_NOTHROW(run_ranks(size, empty_cuda_tensors_without_data));
}

/// Buffer::allocate on another device than the current one leaves the current one as it was:
/// the application's next kernel or allocation must not move to that device.
void allocation_keeps_the_current_device(const Environment& env) {
  auto fake = install_fake(env, 2);
  fake->set_device(0);
  const Buffer on_one = Buffer::allocate(16, DType::Float32, Device::cuda(1));
  RANK_CHECK(fake->current_device() == 0,
             "Buffer::allocate on cuda:1 left cuda:" << fake->current_device() << " current");
  RANK_CHECK(on_one.device() == Device::cuda(1), "allocated on " << on_one.device().to_string());
  for (std::size_t i = 0; i < 16; ++i)
    RANK_CHECK(on_one.data_as<float>()[i] == 0.0f, "element " << i << " is not zeroed");
}

TEST_CASE("Buffer::allocate on a CUDA device keeps the caller's current device", "[gpu]") {
  REQUIRE_NOTHROW(run_ranks(1, allocation_keeps_the_current_device));
}

void streams_and_timeout(const Environment& env) {
  auto fake = install_fake(env);
  auto comm = world(env);
  Buffer d = device_buffer(*fake, 4, DType::Float32);

  // Without a stream: the communicator's own stream, after the legacy default stream.
  fake->clear_calls();
  comm->allreduce(d, ReduceOp::Sum);
  const gpu::StreamHandle own = fake->last_op_stream();
  RANK_CHECK(own.bits != 0, "no-stream op ran on the legacy default stream");
  RANK_CHECK(count_calls(*fake, "stream_wait_event stream=" + std::to_string(own.bits)) == 1,
             "own stream not ordered after the default stream");
  // With one: that stream, and *_async returns a Work that completes.
  const gpu::StreamHandle mine = fake->create_stream();
  CollectiveOptions o;
  o.stream = Stream{mine.bits};
  Work w = comm->allreduce_async(d, d, ReduceOp::Sum, o);
  RANK_CHECK(fake->last_op_stream() == mine, "async op not on the given stream");
  w.wait();
  RANK_CHECK(w.test() && !w.error(), "async op did not complete");

  // Every rank's ops now hang (a peer died): the Work stays pending, a stream made to wait on it
  // is stuck, and at the deadline the NCCL communicator is aborted and the communicator poisoned.
  fake->set_hang(true);
  o.timeout = std::chrono::milliseconds(400);
  Work hung = comm->allreduce_async(d, d, ReduceOp::Sum, o);
  RANK_CHECK(!hung.test(), "a hung op reported completion");
  const gpu::StreamHandle later = fake->create_stream();
  hung.make_stream_wait(Stream{later.bits});
  RANK_CHECK(fake->stream_stuck(later), "make_stream_wait did not order the other stream");
  expect_error([&] { hung.wait(); }, ErrorCode::Timeout, {"allreduce #", "400 ms", "aborted"},
               "hung op");
  RANK_CHECK(fake->aborts() == 1, "NCCL communicator aborted " << fake->aborts() << " times");
  RANK_CHECK(!fake->stream_stuck(later), "the abort left a stream stuck");
  RANK_CHECK(comm->is_poisoned(), "timeout did not poison");
  expect_error([&] { comm->allreduce(d, ReduceOp::Sum); }, ErrorCode::InvalidUsage, {"unusable"},
               "after the timeout");
  fake->set_hang(false);
}

TEST_CASE("GPU ops follow their stream; a hung op times out, aborts NCCL and poisons", "[gpu]") {
  for (int size : {1, 2}) REQUIRE_NOTHROW(run_ranks(size, streams_and_timeout));
}

void watchdog_and_errors(const Environment& env) {
  auto fake = install_fake(env);
  {
    // Nobody waits: the watchdog fails the op at its deadline all the same.
    auto comm = world(env);
    Buffer d = device_buffer(*fake, 4, DType::Float32);
    comm->allreduce(d, ReduceOp::Sum);
    fake->set_hang(true);
    CollectiveOptions o;
    o.timeout = std::chrono::milliseconds(200);
    Work unwaited = comm->allreduce_async(d, d, ReduceOp::Sum, o);
    const auto give_up = Clock::now() + std::chrono::seconds(20);
    while (!comm->is_poisoned() && Clock::now() < give_up) std::this_thread::yield();
    RANK_CHECK(comm->is_poisoned(), "the watchdog never failed an unwaited op");
    RANK_CHECK(comm->error()->code() == ErrorCode::Timeout, comm->error()->what());
    fake->set_hang(false);
  }
  {
    // NCCL's asynchronous error (a peer failed): RemoteError, with NCCL's message.
    auto comm = world(env);
    Buffer d = device_buffer(*fake, 4, DType::Float32);
    comm->allreduce(d, ReduceOp::Sum);
    fake->set_hang(true);
    Work w = comm->allreduce_async(d, d, ReduceOp::Sum);
    fake->set_async_failure("remote process exited", true);  // a peer dies mid-op
    expect_error([&] { w.wait(); }, ErrorCode::RemoteError,
                 {"remote process exited", "allreduce #"}, "async error");
    fake->set_async_failure("", false);
    fake->set_hang(false);
  }
  {
    // The event recorded after an op's kernels cannot be made: the kernels are queued and
    // untracked, so NCCL is aborted (ending them) and the communicator fails, as when queueing
    // the op itself fails.
    auto comm = world(env);
    Buffer d = device_buffer(*fake, 4, DType::Float32);
    comm->allreduce(d, ReduceOp::Sum);
    const int aborts_before = fake->aborts();
    fake->set_record_failure(true);
    expect_error([&] { comm->allreduce(d, ReduceOp::Sum); }, ErrorCode::SystemError,
                 {"cudaEventRecord failed", "allreduce #"}, "failed event record");
    fake->set_record_failure(false);
    RANK_CHECK(fake->aborts() == aborts_before + 1,
               "NCCL was not aborted after its op went untracked");
    RANK_CHECK(comm->is_poisoned(), "the communicator still takes ops");
  }
  {
    // abort() fails an outstanding GPU op with its reason.
    auto comm = world(env);
    Buffer d = device_buffer(*fake, 4, DType::Float32);
    comm->allreduce(d, ReduceOp::Sum);
    fake->set_hang(true);
    Work w = comm->allreduce_async(d, d, ReduceOp::Sum);
    comm->abort("stop now");
    expect_error([&] { w.wait(); }, ErrorCode::InvalidUsage, {"stop now"}, "aborted op");
    fake->set_hang(false);
  }
  {
    // A send and a sendrecv on device buffers that hang name themselves by fields, as on the
    // host: the bare op, its number, its peers and its tag.
    auto comm = world(env);
    const int n = comm->size();
    const int next = (comm->rank() + 1) % n;
    const int prev = (comm->rank() + n - 1) % n;
    Buffer d = device_buffer(*fake, 4, DType::Float32);
    comm->allreduce(d, ReduceOp::Sum);
    fake->set_hang(true);
    CollectiveOptions o;
    o.timeout = std::chrono::milliseconds(200);
    Work sent = comm->send_async(d, next, 5, o);
    const Error hung =
        caught_error([&] { sent.wait(); }, ErrorCode::Timeout,
                     {"send #0 to rank " + std::to_string(next) + " (tag 5)"}, "hung send");
    expect_op(hung, "send", 0, comm->id(), "hung send");
    RANK_CHECK(
        hung.context().to_rank == next && !hung.context().from_rank && hung.context().tag == 5,
        "hung send's peer and tag: " << hung.what());
    fake->set_hang(false);

    auto other = world(env);
    other->allreduce(d, ReduceOp::Sum);
    fake->set_hang(true);
    Buffer back = device_buffer(*fake, 4, DType::Float32);
    const Error pair =
        caught_error([&] { other->sendrecv(d, next, back, prev, 6, o); }, ErrorCode::Timeout,
                     {"sendrecv #0 (send to rank "}, "hung sendrecv");
    expect_op(pair, "sendrecv", 0, other->id(), "hung sendrecv");
    RANK_CHECK(pair.context().to_rank == next && pair.context().from_rank == prev &&
                   pair.context().tag == 6,
               "hung sendrecv's peers and tag: " << pair.what());
    fake->set_hang(false);
  }
}

TEST_CASE("unwaited GPU ops time out by the watchdog; NCCL errors and abort() fail them", "[gpu]") {
  REQUIRE_NOTHROW(run_ranks(2, watchdog_and_errors));
}

void lazy_set_up_timeout(const Environment& env) {
  auto fake = install_fake(env);
  auto comm = world(env);
  auto store = connect_store(env);
  if (comm->rank() == 0) {
    // Rank 1 never makes a GPU op: the NCCL set-up cannot complete, and the op says why.
    Buffer d = device_buffer(*fake, 4, DType::Float32);
    CollectiveOptions o;
    o.timeout = std::chrono::milliseconds(500);
    expect_error([&] { comm->allreduce(d, d, ReduceOp::Sum, o); }, ErrorCode::Timeout,
                 {"allreduce #0", "NCCL communicator"}, "set-up timeout");
    RANK_CHECK(comm->is_poisoned(), "a failed set-up left the communicator usable");
    store->set_string("test/rank0-done", "1");
  } else {
    store->wait({"test/rank0-done"}, std::chrono::seconds(60));
  }
}

TEST_CASE("the NCCL communicator is set up on the first GPU op, bounded by its deadline", "[gpu]") {
  REQUIRE_NOTHROW(run_ranks(2, lazy_set_up_timeout));
}

// Runs `op` on a thread of its own; its error (or none) once joined.
class OpThread {
 public:
  explicit OpThread(std::function<void()> op)
      : thread_([this, op = std::move(op)] {
          id_.set_value(test::current_thread_id());
          try {
            op();
          } catch (const Error& e) {
            error_ = e;
          }
        }) {}
  ~OpThread() {
    if (thread_.joinable()) thread_.join();
  }
  pid_t id() { return id_future_.get(); }
  std::optional<Error> join() {
    thread_.join();
    return error_;
  }

 private:
  std::promise<pid_t> id_;
  std::shared_future<pid_t> id_future_ = id_.get_future().share();
  std::optional<Error> error_;
  std::thread thread_;
};

void abort_stops_set_up(const Environment& env) {
  auto fake = install_fake(env, /*devices=*/2);
  auto store = connect_store(env);
  CollectiveOptions long_timeout;
  long_timeout.timeout = std::chrono::seconds(60);
  // First rank 0 alone starts a GPU op (it waits in NCCL's init for rank 1), then rank 1 alone
  // (it waits for rank 0's unique id). Each is aborted from its main thread meanwhile, which
  // must end the op with the abort's reason, not at the op's 60 s deadline with a Timeout.
  for (const int alone : {0, 1}) {
    auto comm = world(env);
    const std::string done = "test/alone" + std::to_string(alone) + "-done";
    if (comm->rank() != alone) {
      store->wait({done}, std::chrono::seconds(120));
      continue;
    }
    Buffer d = device_buffer(*fake, 4, DType::Float32);
    OpThread op([&] { comm->allreduce(d, d, ReduceOp::Sum, long_timeout); });
    if (alone == 0) {
      // In NCCL's init, waiting for a peer that never joins.
      await_call(*fake, "init");
      RANK_CHECK(count_calls(*fake, "init") == 1, "rank 0 never reached NCCL's init");
      // Meanwhile another thread's op on another device is refused as it would be afterwards
      // (the communicator is being bound to cuda:0), not left to wait for the set-up.
      Buffer other = device_buffer(*fake, 4, DType::Float32, /*device=*/1);
      expect_error([&] { comm->allreduce(other, other, ReduceOp::Sum, long_timeout); },
                   ErrorCode::InvalidArgument, {"cuda:1", "cuda:0"}, "second device during set-up");
    } else {
      // Asleep in the store read for rank 0's unique id.
      RANK_CHECK(test::wait_until_blocked(op.id(), test::BlockedIn::FileDescriptor,
                                          std::chrono::seconds(30)),
                 "rank 1 never waited for the unique id");
    }
    comm->abort("the test stops set-up");
    const std::optional<Error> error = op.join();
    RANK_CHECK(error.has_value(), "the op survived abort()");
    RANK_CHECK(error->code() == ErrorCode::InvalidUsage,
               "set-up ended with " << error->what() << ", not the abort");
    RANK_CHECK(std::string(error->what()).find("the test stops set-up") != std::string::npos,
               "the op's error does not name the abort: " << error->what());
    RANK_CHECK(fake->live_communicators() == 0, "a half-made NCCL communicator was left");
    store->set_string(done, "1");
  }
}

TEST_CASE("abort() stops a GPU set-up waiting on its peers, and its error says why", "[gpu]") {
  REQUIRE_NOTHROW(run_ranks(2, abort_stops_set_up));
}

void concurrent_first_ops(const Environment& env) {
  auto fake = install_fake(env);
  auto comm = world(env);
  const int n = comm->size();
  // Two threads start the communicator's first GPU ops together: one sets NCCL up, the other
  // waits for it. Equal inputs, so the ops' order across threads does not change the sums.
  constexpr int kThreads = 2;
  std::vector<Buffer> buffers;
  for (int t = 0; t < kThreads; ++t) {
    buffers.push_back(device_buffer(*fake, 8, DType::Float32));
    for (std::size_t i = 0; i < 8; ++i) set(buffers.back(), i, comm->rank() + 1);
  }
  std::vector<std::unique_ptr<OpThread>> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.push_back(std::make_unique<OpThread>(
        [&, t] { comm->allreduce(buffers[t], buffers[t], ReduceOp::Sum); }));
  for (auto& thread : threads) {
    const std::optional<Error> error = thread->join();
    RANK_CHECK(!error, "a concurrent first op failed: " << error->what());
  }
  for (int t = 0; t < kThreads; ++t)
    expect_values(
        buffers[t], 0, 8, [&](std::size_t) { return double(n * (n + 1) / 2); }, "concurrent");
  RANK_CHECK(count_calls(*fake, "init") == 1,
             "NCCL set up " << count_calls(*fake, "init") << " times, not once");
  RANK_CHECK(count_calls(*fake, "unique_id") == (comm->rank() == 0 ? 1u : 0u),
             "more than one unique id");
}

TEST_CASE("two threads' first GPU ops set NCCL up once", "[gpu]") {
  for (const int ranks : {2, 3}) REQUIRE_NOTHROW(run_ranks(ranks, concurrent_first_ops));
}

/// Set on the thread whose next device check (prepare()'s last, nccl_supports) the fake holds.
thread_local bool hold_next_dtype_check = false;

void refused_before_numbering(const Environment& env) {
  auto fake = install_fake(env, /*devices=*/2);
  auto store = connect_store(env);
  auto comm = world(env);
  const int n = comm->size();
  const double sum = n * (n + 1) / 2.0;
  CollectiveOptions long_timeout;
  long_timeout.timeout = std::chrono::seconds(60);
  const int device = comm->rank() == 0 ? 1 : 0;  // rank 0's GPU ops run on cuda:1
  Buffer d = device_buffer(*fake, 4, DType::Float32, device);
  for (std::size_t i = 0; i < 4; ++i) set(d, i, comm->rank() + 1);
  if (comm->rank() != 0) {
    // Joins rank 0's first GPU op once rank 0's other thread is past its device checks.
    store->wait({"test/refusal/go"}, std::chrono::seconds(120));
  } else {
    // Thread B's op on cuda:0 passes every check but the last while nothing is bound yet; it is
    // held there until thread A's op on cuda:1 is setting NCCL up. B must then be refused before
    // it is numbered: numbered, its refusal failed the communicator, and had it not, this rank
    // would count one op more than its peers, which never saw B.
    std::promise<void> held;
    std::promise<void> release;
    std::shared_future<void> released = release.get_future().share();
    fake->set_dtype_check_hook([&held, released] {
      if (!hold_next_dtype_check) return;
      hold_next_dtype_check = false;
      held.set_value();
      released.wait_for(std::chrono::seconds(60));
    });
    Buffer on_0 = device_buffer(*fake, 4, DType::Float32, /*device=*/0);
    OpThread b([&] {
      hold_next_dtype_check = true;
      comm->allreduce(on_0, on_0, ReduceOp::Sum, long_timeout);
    });
    RANK_CHECK(held.get_future().wait_for(std::chrono::seconds(30)) == std::future_status::ready,
               "thread B never reached its dtype check");
    OpThread a([&] { comm->allreduce(d, d, ReduceOp::Sum, long_timeout); });
    await_call(*fake, "init");
    RANK_CHECK(count_calls(*fake, "init") == 1, "thread A never reached NCCL's init");
    release.set_value();
    const std::optional<Error> refused = b.join();
    RANK_CHECK(refused.has_value(), "B's op on cuda:0 ran on a communicator bound to cuda:1");
    RANK_CHECK(refused->code() == ErrorCode::InvalidArgument, "B: " << refused->what());
    RANK_CHECK(std::string(refused->what()).find("cuda:0") != std::string::npos &&
                   std::string(refused->what()).find("cuda:1") != std::string::npos,
               "B's refusal does not name both devices: " << refused->what());
    RANK_CHECK(!comm->is_poisoned(), "B's refusal failed the communicator: "
                                         << (comm->error() ? comm->error()->what() : ""));
    store->set_string("test/refusal/go", "1");
    const std::optional<Error> a_error = a.join();
    RANK_CHECK(!a_error, "A's op failed: " << a_error->what());
    fake->set_dtype_check_hook(nullptr);
  }
  if (comm->rank() != 0) comm->allreduce(d, d, ReduceOp::Sum, long_timeout);
  expect_values(
      d, 0, 4, [&](std::size_t) { return sum; }, "the first GPU allreduce");
  // Every rank counted the same ops: a host op and a GPU op after it still pair up.
  Buffer host = Buffer::allocate(3, DType::Int32);
  for (std::size_t i = 0; i < 3; ++i) set(host, i, comm->rank() + 1);
  comm->allreduce(host, ReduceOp::Sum, long_timeout);
  expect_values(
      host, 0, 3, [&](std::size_t) { return sum; }, "the host allreduce after it");
  comm->allreduce(d, d, ReduceOp::Sum, long_timeout);
  expect_values(
      d, 0, 4, [&](std::size_t) { return sum * n; }, "a GPU allreduce after it");
}

TEST_CASE("an op on another device than a concurrent first op's is refused before it is numbered",
          "[gpu]") {
  for (const int ranks : {2, 3}) REQUIRE_NOTHROW(run_ranks(ranks, refused_before_numbering));
}

void split_uses_nccl_split(const Environment& env) {
  auto fake = install_fake(env);
  auto comm = world(env);
  const int rank = comm->rank();
  Buffer d = device_buffer(*fake, 2, DType::Float64);
  comm->allreduce(d, ReduceOp::Sum);  // the parent's NCCL communicator exists from here
  auto sub = comm->split(rank == 2 ? Communicator::kNoColor : rank % 2, rank);
  RANK_CHECK(count_calls(*fake, "split") == 1, "ncclCommSplit not called on every parent rank");
  if (rank == 2) {
    RANK_CHECK(!sub, "kNoColor got a communicator");
    return;
  }
  for (std::size_t i = 0; i < 2; ++i) set(d, i, rank);
  sub->allreduce(d, ReduceOp::Sum);
  double want = 0;
  for (int r = 0; r < comm->size(); ++r)
    if (r != 2 && r % 2 == rank % 2) want += r;
  expect_values(
      d, 0, 2, [&](std::size_t) { return want; }, "sub allreduce");
  RANK_CHECK(count_calls(*fake, "init") == 1 && count_calls(*fake, "unique_id") <= 1,
             "the child set up NCCL again instead of splitting");
}

TEST_CASE("split() of a communicator with an NCCL communicator splits it", "[gpu]") {
  REQUIRE_NOTHROW(run_ranks(5, split_uses_nccl_split));
}

void failed_split_drops_its_nccl_child(const Environment& env) {
  auto fake = install_fake(env);
  auto comm = world(env);
  const int rank = comm->rank();
  Buffer d = device_buffer(*fake, 2, DType::Float64);
  comm->allreduce(d, ReduceOp::Sum);  // the parent's NCCL communicator exists from here
  RANK_CHECK(fake->live_communicators() == 1, "expected the parent's NCCL communicator only");
  // Every tag id looks taken, so the split fails after NCCL's split made the child: the error
  // comes from the new communicator's host side, which has no id to run on.
  transport::testing::offer_full(true);
  std::optional<Error> error;
  try {
    comm->split(0, rank);
  } catch (const Error& e) {
    error = e;
  }
  transport::testing::offer_full(false);
  RANK_CHECK(error.has_value(), "the split succeeded without a tag id");
  RANK_CHECK(error->code() == ErrorCode::InvalidUsage &&
                 std::string(error->what()).find("tag ids is in use") != std::string::npos,
             "the split failed with " << error->what());
  RANK_CHECK(count_calls(*fake, "split") == 1, "ncclCommSplit was never reached");
  RANK_CHECK(fake->live_communicators() == 1, "the split's NCCL communicator was left behind ("
                                                  << fake->live_communicators() << " live)");
  // The parent goes on: its GPU and host paths both.
  for (std::size_t i = 0; i < 2; ++i) set(d, i, rank + 1);
  comm->allreduce(d, ReduceOp::Sum);
  const double want = comm->size() * (comm->size() + 1) / 2.0;
  expect_values(
      d, 0, 2, [&](std::size_t) { return want; }, "parent allreduce after the failed split");
  comm->barrier();
}

TEST_CASE("a split that fails after NCCL's part aborts the NCCL communicator it made", "[gpu]") {
  for (const int ranks : {2, 3})
    REQUIRE_NOTHROW(run_ranks(ranks, failed_split_drops_its_nccl_child));
}

void abort_stops_split(const Environment& env) {
  auto fake = install_fake(env);
  auto store = connect_store(env);
  CommunicatorOptions options;
  options.timeout = std::chrono::seconds(30);  // the split's deadline: far beyond the test's wait
  auto comm = Communicator::create(env, store, options);
  Buffer d = device_buffer(*fake, 2, DType::Float64);
  comm->allreduce(d, ReduceOp::Sum);  // the NCCL communicator exists from here
  if (comm->rank() != 0) {
    // Takes part in the split's host half, but holds its ncclCommSplit until rank 0 is done: rank
    // 0's split waits for it, holding its backend's mutex, until abort() stops it.
    fake->set_split_hook(
        [&store] { store->wait({"test/split-aborted"}, std::chrono::seconds(120)); });
    // Its outcome is the double's, not NCCL's (the double completes the split from the row rank
    // 0 posted before it aborted; NCCL would time out): only rank 0's is checked.
    comm->split(0, comm->rank());
    fake->set_split_hook(nullptr);
    return;
  }
  OpThread split([&] { comm->split(0, 0); });
  await_call(*fake, "split");
  RANK_CHECK(count_calls(*fake, "split") == 1, "rank 0 never reached ncclCommSplit");
  comm->abort("the test stops the split");  // returned only at the split's deadline before
  const std::optional<Error> error = split.join();
  RANK_CHECK(error.has_value(), "the split survived abort()");
  RANK_CHECK(error->code() == ErrorCode::InvalidUsage, "the split ended with " << error->what());
  RANK_CHECK(std::string(error->what()).find("the test stops the split") != std::string::npos,
             "the split's error does not name the abort: " << error->what());
  RANK_CHECK(fake->live_communicators() == 0, "an NCCL communicator was left after the abort");
  store->set_string("test/split-aborted", "1");
}

TEST_CASE("abort() stops a GPU split waiting on its peers, and the split's error says why",
          "[gpu]") {
  REQUIRE_NOTHROW(run_ranks(2, abort_stops_split));
}

}  // namespace
