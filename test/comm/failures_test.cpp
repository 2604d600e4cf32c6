// What goes wrong: bad arguments rejected by name before any byte moves (and the communicator
// still works afterwards), cross-rank mismatches caught by the COHORT_DEBUG=detail fingerprint,
// and a rank killed mid-collective failing every other rank with its name, then fast.

#include "bootstrap/forwarding_store.hpp"
#include "comm/executor.hpp"
#include "rank_checks.hpp"
#include "support/blocked_thread.hpp"
#include "support/cross_process_reads.hpp"
#include "support/forked_child.hpp"
#include "support/process_exit.hpp"
#include "support/scoped_env.hpp"
#include "support/temp_dir.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

namespace {

using namespace cohort;
using namespace cohort::test;
using namespace std::chrono_literals;

void allreduce_works(Communicator& c, const char* when) {
  Buffer b = Buffer::allocate(10, DType::Int32);
  for (std::size_t i = 0; i < 10; ++i) set(b, i, 1);
  c.allreduce(b, ReduceOp::Sum);
  expect_values(
      b, 0, 10, [&](std::size_t) { return c.size(); }, when);
}

/// Whether single copy can run on this machine (the kernel lets sibling processes read each
/// other's memory); says so in the test's output when it cannot, as its tests then skip.
bool single_copy_runs_here() {
  if (siblings_can_read_each_other()) return true;
  WARN("this machine does not let ranks read each other's memory: single copy declines");
  return false;
}

/// A world with its arena set up, single copy allowed and no fingerprinting (the disagreements
/// in the single-copy tests must reach the arena, not COHORT_DEBUG's cross-check).
std::shared_ptr<Communicator> single_copy_world(const Environment& env) {
  ::unsetenv("COHORT_DEBUG");
  ScopedEnv shm("COHORT_SHARED_MEMORY", "auto");
  ScopedEnv single("COHORT_SINGLE_COPY", "auto");
  auto c = world(env);
  allreduce_works(*c, "before");  // sets the arena up
  return c;
}

/// Arguments of a v-collective whose ranks disagree about the counts while their totals agree
/// (so the arena's announcements match): rank 0 thinks rank 0 has 1 element and rank 1 has 3,
/// the others think every rank has 2. Single copy forced, with a deadline of 60 s.
struct DisagreeingCounts {
  explicit DisagreeingCounts(const Environment& env)
      : counts(static_cast<std::size_t>(env.world_size), 2) {
    if (env.rank == 0) {
      counts[0] = 1;
      counts[1] = 3;
    }
    in = Buffer::allocate(counts[static_cast<std::size_t>(env.rank)], DType::Float32);
    out = Buffer::allocate(2 * counts.size(), DType::Float32);
    forced.algorithm = Algorithm::SingleCopy;
    forced.timeout = 60s;
  }
  std::vector<std::size_t> counts;
  Buffer in;
  Buffer out;
  CollectiveOptions forced;
};

/// Runs `body` on every rank of a `size`-rank single_copy_world, and checks that each rank got
/// through it (failing, as these tests expect) long before the 60 s deadline they set.
void run_single_copy_ranks(int size,
                           const std::function<void(const Environment&, Communicator&)>& body) {
  REQUIRE_NOTHROW(run_ranks(size, [&](const Environment& env) {
    auto c = single_copy_world(env);
    const auto start = std::chrono::steady_clock::now();
    body(env, *c);
    RANK_CHECK(std::chrono::steady_clock::now() - start < 30s, "failed before the deadline");
  }));
}

void check_validation(Communicator& c) {
  const int n = c.size();
  const std::size_t un = static_cast<std::size_t>(n);
  Buffer f4 = Buffer::allocate(4, DType::Float32);
  Buffer f4n = Buffer::allocate(4 * un, DType::Float32);
  Buffer i4 = Buffer::allocate(4, DType::Int32);
  const auto E = ErrorCode::InvalidArgument;

  expect_error([&] { c.broadcast(f4, n); }, E,
               {"broadcast", "root " + std::to_string(n), "size " + std::to_string(n)},
               "root == size");
  expect_error([&] { c.reduce(f4, f4, ReduceOp::Sum, -1); }, E, {"reduce", "root -1"},
               "negative root");
  expect_error([&] { c.gather(f4, f4n, n + 3, {}); }, E,
               {"gather", "root " + std::to_string(n + 3)}, "gather root");
  expect_error([&] { c.allreduce(f4, Buffer::allocate(5, DType::Float32), ReduceOp::Sum); }, E,
               {"allreduce", "5 elements", "expected 4"}, "allreduce count mismatch");
  expect_error(
      [&] { c.allgather(f4, Buffer::allocate(4 * un + 1, DType::Float32)); }, E,
      {"allgather", std::to_string(4 * un + 1) + " elements", "expected " + std::to_string(4 * un)},
      "allgather count");
  expect_error([&] { c.allreduce(f4, i4, ReduceOp::Sum); }, E, {"allreduce", "float", "int32"},
               "dtype mismatch");
  expect_error([&] { c.allreduce(f4, f4.as_read_only(), ReduceOp::Sum); }, E,
               {"allreduce", "read-only"}, "read-only output");
  expect_error([&] { c.allreduce(f4, ReduceOp::BXor); }, E, {"allreduce", "bxor", "float"},
               "bitwise op on floats");
  const std::vector<std::size_t> short_counts(un + 1, 1);
  expect_error(
      [&] { c.allgatherv(f4, f4n, short_counts); }, E,
      {"allgatherv", std::to_string(un + 1) + " entries", "expected " + std::to_string(un)},
      "counts length");
  expect_error([&] { c.send(f4, n); }, E, {"send", "peer " + std::to_string(n)},
               "peer out of range");
  expect_error([&] { c.recv(f4, c.rank()); }, E,
               {"recv", "peer " + std::to_string(c.rank()), "this rank"}, "self peer");
  expect_error([&] { c.send(f4, (c.rank() + 1) % n, -2); }, E, {"send", "tag -2"}, "negative tag");
  CollectiveOptions zero;
  zero.timeout = 0ms;
  expect_error([&] { c.barrier(zero); }, E, {"barrier", "timeout 0 ms"}, "zero timeout");
  // Non-contiguous: every other element of an 8-element buffer.
  Buffer strided = Buffer::view(f4n.data(), std::vector<std::int64_t>{2}, DType::Float32,
                                Device::cpu(), std::vector<std::int64_t>{2});
  expect_error([&] { c.allreduce(strided, ReduceOp::Sum); }, E, {"allreduce", "not contiguous"},
               "strided");
  Buffer on_gpu =
      Buffer::view(f4.data(), std::vector<std::int64_t>{4}, DType::Float32, Device::cuda(0));
  // Routed to the GPU path, which cannot run here (no device, or no CUDA in this build): refused
  // before anything is queued, like every argument error here, leaving the communicator usable.
  // (Where a GPU is present this host memory must not reach NCCL: the check needs none.)
  bool gpu_present = true;
  try {
    Buffer::allocate(1, DType::Float32, Device::cuda(0));
  } catch (const Error&) {
    gpu_present = false;
  }
  if (!gpu_present)
    expect_error([&] { c.allreduce(on_gpu, ReduceOp::Sum); }, ErrorCode::Unsupported, {"allreduce"},
                 "device");
  // Host and device buffers in one op: InvalidArgument naming both.
  Buffer host4 = Buffer::allocate(4, DType::Float32);
  expect_error([&] { c.allreduce(host4, on_gpu, ReduceOp::Sum); }, E,
               {"allreduce", "cuda:0", "cpu"}, "host and device");
  // count x size overflows size_t (never dereferenced: validation fails first).
  std::uint8_t byte = 0;
  // Validation runs on 3 and 4 ranks: the largest count a Buffer allows times 3 overflows.
  const auto huge = static_cast<std::size_t>(std::numeric_limits<std::int64_t>::max());
  expect_error(
      [&] {
        c.allgather(Buffer::view(&byte, huge, DType::UInt8), Buffer::view(&byte, 1, DType::UInt8));
      },
      E, {"allgather", "overflows"}, "count x size overflow");
  if (n >= 3) {
    // 2^61 - 1 floats from each of 3 or 4 ranks (the largest float Buffer there is, below 2^63
    // bytes): the element total fits, its bytes do not. Gather and scatter check both products
    // before touching either buffer.
    const std::size_t eighth = (std::size_t{1} << 61) - 1;
    float one = 0;
    expect_error(
        [&] {
          c.gather(Buffer::view(&one, eighth, DType::Float32),
                   Buffer::view(&one, 1, DType::Float32), 0);
        },
        E, {"gather", "total bytes", "overflows"}, "gather bytes overflow");
    expect_error(
        [&] {
          c.scatter(Buffer::view(&one, 1, DType::Float32),
                    Buffer::view(&one, eighth, DType::Float32), 0);
        },
        E, {"scatter", "total bytes", "overflows"}, "scatter bytes overflow");
  }
  expect_error(
      [&] {
        c.alltoall(Buffer::allocate(un + 1, DType::Int32), Buffer::allocate(un + 1, DType::Int32));
      },
      E, {"alltoall", std::to_string(un + 1), "not divisible"}, "alltoall divisibility");
  // Every rank made the same bad calls and none moved a byte: the communicator still works.
  allreduce_works(c, "allreduce after validation errors");
}

std::string slurp(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

TEST_CASE("bad arguments are rejected by name; the communicator keeps working",
          "[comm][multiproc]") {
  const int size = GENERATE(1, 3, 4);
  CAPTURE(size);
  REQUIRE_NOTHROW(run_ranks(size, [](const Environment& env) {
    auto c = world(env);
    if (c->size() == 1) {
      // A world of one has no peers: point-to-point checks need two ranks.
      Buffer f4 = Buffer::allocate(4, DType::Float32);
      expect_error([&] { c->send(f4, 0); }, ErrorCode::InvalidArgument, {"peer 0", "this rank"},
                   "self");
      allreduce_works(*c, "world of one");
      return;
    }
    check_validation(*c);
  }));
}

TEST_CASE("COHORT_DEBUG=detail names the ranks whose arguments disagree", "[comm][multiproc]") {
  REQUIRE_NOTHROW(run_ranks(3, [](const Environment& env) {
    ::setenv("COHORT_DEBUG", "detail", 1);
    auto c = world(env);
    allreduce_works(*c, "matching allreduce under debug");  // op #0
    // Rank 2 passes 12 elements where the others pass 10.
    const std::size_t count = env.rank == 2 ? 12 : 10;
    Buffer b = Buffer::allocate(count, DType::Float32);
    expect_error([&] { c->allreduce(b, ReduceOp::Sum); }, ErrorCode::InvalidArgument,
                 {"allreduce #1", "rank 0 has count=10", "rank 2 has count=12"}, "count mismatch");
    // Rank 1 broadcasts from another root.
    Buffer d = Buffer::allocate(4, DType::Float64);
    expect_error([&] { c->broadcast(d, env.rank == 1 ? 1 : 0); }, ErrorCode::InvalidArgument,
                 {"broadcast #2", "rank 0 has root=0", "rank 1 has root=1"}, "root mismatch");
    // A rank calling a different collective.
    expect_error(
        [&] {
          if (env.rank == 0)
            c->barrier();
          else
            c->allreduce(b, ReduceOp::Max);
        },
        ErrorCode::InvalidArgument, {"#3", "rank 0 called barrier", "rank 1 called allreduce"},
        "op mismatch");
    // alltoallv: rank 0 sends 2 to rank 1, but rank 1 expects 3 from rank 0.
    std::vector<std::size_t> send_counts(3, 1), recv_counts(3, 1);
    if (env.rank == 0) send_counts[1] = 2;
    if (env.rank == 1) recv_counts[0] = 3;
    Buffer in = Buffer::allocate(4, DType::Int32);
    in = in.slice(0, static_cast<std::int64_t>(send_counts[0] + send_counts[1] + send_counts[2]));
    Buffer out = Buffer::allocate(recv_counts[0] + recv_counts[1] + recv_counts[2], DType::Int32);
    expect_error([&] { c->alltoallv(in, send_counts, out, recv_counts); },
                 ErrorCode::InvalidArgument,
                 {"rank 0 sends 2 elements to rank 1", "rank 1 expects 3"}, "alltoallv mismatch");
    // Mismatches are found by all ranks after a full exchange, so nothing is poisoned.
    allreduce_works(*c, "allreduce after mismatches");
  }));
}

TEST_CASE("a rank killed mid-allreduce fails the others naming it, then fast",
          "[comm][multiproc]") {
  const int size = GENERATE(2, 4);
  // Two ways a peer dies, each with the peer-failure detection that can report it safely:
  // - "peer": the victim dies with its part of the allreduce under way, so survivors may be
  //   mid-way through reading its memory. UCX 1.13's shared-memory transports abort a process
  //   whose source segment vanishes, so this runs with UCX's own peer-failure handling
  //   (COHORT_UCX_ERR_HANDLING=peer).
  // - "auto" (the default): the victim dies before it joins, so survivors are waiting on it and
  //   the same-host process watch must turn the silence into an error naming it.
  const std::string mode = GENERATE(std::string("peer"), std::string("auto"));
  CAPTURE(size, mode);
  const ScopedEnv err_handling("COHORT_UCX_ERR_HANDLING", mode);
  const TempDir dir("cohort-comm-test");
  const int victim = size - 1;
  const bool victim_joins = mode == "peer";
  // launch() reports the killed rank; the survivors report through files.
  try {
    LaunchOptions options;
    options.timeout = 60s;
    options.grace = 30s;  // survivors ignore SIGTERM and finish within the op timeout
    launch(
        size,
        [&](const Environment& env) {
          // The launcher stops the others once the victim dies; survivors stay to report.
          std::signal(SIGTERM, SIG_IGN);
          CommunicatorOptions copts;
          copts.timeout = 5s;
          std::shared_ptr<Store> store = connect_store(env);
          auto c = Communicator::create(env, store, copts);
          allreduce_works(*c, "before the kill");
          store->set_string("before_kill/" + std::to_string(env.rank), "done");
          Buffer big = Buffer::allocate(1 << 20, DType::Float32);
          if (env.rank == victim) {
            // It dies only once every rank has finished the allreduce before the kill.
            std::vector<std::string> all_done;
            for (int r = 0; r < size; ++r) all_done.push_back("before_kill/" + std::to_string(r));
            store->wait(all_done, 30s);
            store->set_string("victim_pid", std::to_string(::getpid()));
            if (victim_joins) {
              // Its part gets under way before it dies. Nothing public says when its progress
              // thread has posted it, so the victim gives it 100 ms of Work::wait, which must
              // time out: the others join only after the victim's death. The assertions do not
              // depend on those 100 ms: a victim that dies before posting is the "auto" case.
              Work w = c->allreduce_async(big, big, ReduceOp::Sum);
              expect_error([&] { w.wait(100ms); }, ErrorCode::Timeout, {"100 ms"},
                           "the victim's allreduce without the others");
            }
            std::raise(SIGKILL);
          }
          // The others start the allreduce once the victim is dead: its pid's exit is the event.
          const auto victim_pid =
              static_cast<pid_t>(std::stol(store->get_string("victim_pid", 30s)));
          RANK_CHECK(wait_for_exit(victim_pid, 30s), "victim " << victim_pid << " still alive");
          std::ofstream report(dir.path() / ("rank" + std::to_string(env.rank)));
          try {
            c->allreduce(big, ReduceOp::Sum);
            report << "allreduce succeeded\n";
            return;
          } catch (const Error& e) {
            const bool code_ok =
                e.code() == ErrorCode::RemoteError || e.code() == ErrorCode::Timeout;
            const bool names_op = e.message().find("allreduce #1") != std::string::npos;
            // Ranks waiting on the victim name it; ranks waiting on a survivor that gave up name
            // that survivor (the parent checks that at least one names the victim).
            const bool names_a_peer = e.message().find("rank ") != std::string::npos;
            const bool names_victim =
                e.message().find("rank " + std::to_string(victim)) != std::string::npos;
            report << "first " << (code_ok && names_op && names_a_peer ? "ok" : "BAD")
                   << (names_victim ? " names-victim " : " ") << e.what() << "\n";
          }
          try {
            allreduce_works(*c, "after the failure");
            report << "later op succeeded\n";
          } catch (const Error& e) {
            const bool ok = e.code() == ErrorCode::InvalidUsage &&
                            e.message().find("allreduce #1") != std::string::npos;
            report << "later " << (ok ? "ok" : "BAD") << " " << e.what() << "\n";
          }
          report.flush();
          // Survivors leave together: a peer may still be reading `big` through shared memory
          // for a rendezvous it has not given up on yet, and UCX aborts a reader whose source
          // vanished.
          store->set_string("survivor_done/" + std::to_string(env.rank), "1");
          std::vector<std::string> survivors_done;
          for (int r = 0; r < size; ++r)
            if (r != victim) survivors_done.push_back("survivor_done/" + std::to_string(r));
          store->wait(survivors_done, 20s);
        },
        options);
    FAIL("launch succeeded although rank " << victim << " was killed");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::RemoteError);
    CHECK_THAT(e.message(), Catch::Contains("rank " + std::to_string(victim)));
    // Killed, not failed: a victim whose own check threw would exit 1 instead.
    CHECK_THAT(e.message(), Catch::Contains("SIGKILL"));
  }
  int naming_victim = 0;
  for (int r = 0; r < size; ++r) {
    if (r == victim) continue;
    const std::string report = slurp(dir.path() / ("rank" + std::to_string(r)));
    INFO("rank " << r << " reported: " << report);
    CHECK_THAT(report, Catch::Contains("first ok"));
    CHECK_THAT(report, Catch::Contains("later ok"));
    if (report.find("names-victim") != std::string::npos) ++naming_victim;
  }
  CHECK(naming_victim >= 1);
}

TEST_CASE("abort() fails the running op, the queued ones and every later one with its reason",
          "[comm][multiproc]") {
  // "off": the op waits in UCX (the test sees it asleep in poll before aborting); "auto": in the
  // shared arena (it may still be starting when abort() comes; the outcome must be the same).
  const std::string shm = GENERATE("off", "auto");
  CAPTURE(shm);
  REQUIRE_NOTHROW(run_ranks(3, [shm](const Environment& env) {
    ScopedEnv mode("COHORT_SHARED_MEMORY", shm.c_str());
    auto c = world(env);
    allreduce_works(*c, "before abort");  // every pair connected, the arena set up
    auto side = c->dup();                 // shares c's connections; not aborted with it
    CollectiveOptions slow;
    slow.timeout = 120s;  // far beyond the test's: a Timeout would mean abort() did not cut in
    if (env.rank != 0) {
      // Stays out of c's next op, and alive, until rank 0 has checked everything.
      side->barrier(slow);
      return;
    }
    Buffer b = Buffer::allocate(1 << 16, DType::Float32);
    std::optional<Error> running;
    std::atomic<pid_t> tid{0};
    std::thread op([&] {
      tid = current_thread_id();
      try {
        c->allreduce(b, ReduceOp::Sum, slow);
      } catch (const Error& e) {
        running = e;
      }
    });
    while (tid.load() == 0) std::this_thread::yield();
    if (shm == "off")
      RANK_CHECK(wait_until_blocked(tid.load(), BlockedIn::FileDescriptor, 60s),
                 "the allreduce thread never blocked in poll");
    Work queued = c->broadcast_async(b, b, 0, slow);
    RANK_CHECK(!c->is_poisoned(), "poisoned before abort()");
    c->abort("test stop");
    op.join();
    RANK_CHECK(running.has_value(), "the running allreduce did not fail");
    RANK_CHECK(running->code() == ErrorCode::InvalidUsage, "running op: " << running->what());
    RANK_CHECK(running->message().find("test stop") != std::string::npos,
               "running op: " << running->what());
    // Named as the allreduce by fields, whichever path the abort reached it by (through a
    // transfer's wait, or before it started, it once came as "allreduce #3").
    expect_op(*running, "allreduce", 2, c->id(), "the running allreduce");  // after #0, dup #1
    // The queued op failed with the cause, readable without rethrowing.
    const std::optional<Error> queued_error = queued.error();
    RANK_CHECK(queued_error.has_value(), "the queued broadcast did not fail");
    RANK_CHECK(queued_error->code() == ErrorCode::InvalidUsage, "queued: " << queued_error->what());
    RANK_CHECK(queued_error->message().find("test stop") != std::string::npos,
               "queued: " << queued_error->what());
    expect_op(*queued_error, "broadcast", 3, c->id(), "the queued broadcast");
    bool rethrown = false;
    try {
      queued.wait();
    } catch (const Error&) {
      rethrown = true;
    }
    RANK_CHECK(rethrown, "Work::wait did not rethrow");
    RANK_CHECK(c->is_poisoned(), "not poisoned after abort()");
    RANK_CHECK(
        c->error()->message().find("communicator 0 was aborted: test stop") != std::string::npos,
        "cause: " << c->error()->what());
    expect_error([&] { c->barrier(); }, ErrorCode::InvalidUsage, {"barrier", "test stop"},
                 "later op");
    c->abort("again");  // the first cause stays
    RANK_CHECK(c->error()->message().find("test stop") != std::string::npos,
               "cause after a second abort: " << c->error()->what());
    // The sibling communicator over the same connections still works, and releases the peers.
    side->barrier(slow);
  }));
}

TEST_CASE("abort() fails a receive whose Work another thread is waiting on", "[comm][multiproc]") {
  // Rank 0's thread waits on a recv_async that rank 1 never sends; the main thread aborts as
  // soon as that thread is about to wait. While a Work::wait polls the receive it holds the
  // communicator's drive, and abort() then leaves the failing to the driver; the receive must
  // fail with abort's reason, not run to its 20 s deadline. Thirty communicators in turn (dup()
  // of the world, each aborted), so some aborts land while the waiter polls.
  REQUIRE_NOTHROW(run_ranks(2, [](const Environment& env) {
    auto world_comm = world(env);
    CollectiveOptions slow;
    slow.timeout = 60s;
    for (int round = 0; round < 30; ++round) {
      auto c = world_comm->dup();
      if (env.rank == 1) {
        world_comm->barrier(slow);  // until rank 0 has seen its receive fail
        continue;
      }
      CollectiveOptions receive_options;
      receive_options.timeout = 20s;  // a Timeout means abort() did not reach the receive
      Buffer in = Buffer::allocate(1 << 10, DType::Float32);
      std::atomic<bool> waiting{false};
      std::optional<Error> failure;
      std::thread waiter([&] {
        Work w = c->recv_async(in, 1, 5, receive_options);
        waiting = true;
        try {
          w.wait();
        } catch (const Error& e) {
          failure = e;
        }
      });
      while (!waiting.load()) std::this_thread::yield();
      c->abort("round " + std::to_string(round));
      waiter.join();
      RANK_CHECK(failure.has_value(), "round " << round << ": the receive did not fail");
      RANK_CHECK(failure->code() == ErrorCode::InvalidUsage,
                 "round " << round << ": " << failure->what());
      RANK_CHECK(failure->message().find("round " + std::to_string(round)) != std::string::npos,
                 "round " << round << ": " << failure->what());
      world_comm->barrier(slow);
    }
  }));
}

/// Set by the owner's deleter of the buffer a failing send used (one test at a time per process).
std::atomic<bool> g_send_buffer_released{false};

/// Rank 0 sends 8 MiB over UCX (shared memory off: a UCX rendezvous, which the receiver reads
/// from the sender's memory) to rank 1, which posts its receive only after rank 0's send timed
/// out and rank 0 let go of its Buffer. UCX goes on with the send: the buffer's owner must stay
/// alive (it was dropped at the cancel, and the receiver then read freed memory), rank 1 must
/// receive the data intact, and the owner must go once the send ended.
void failed_send_keeps_its_buffer(const Environment& env, bool async) {
  ScopedEnv no_fastboxes("COHORT_SHARED_MEMORY", "off");
  auto c = world(env);
  auto spare = c->dup();  // the same connections, still healthy on rank 0 after c fails
  const std::shared_ptr<Store> store = connect_store(env);
  const std::string prefix = std::string("failures_test/kept/") + (async ? "async/" : "blocking/");
  constexpr std::size_t kCount = 2 << 20;  // float32: 8 MiB, well past UCX's rendezvous threshold
  const auto pattern = [](std::size_t i) { return static_cast<double>(i % 1000); };
  if (env.rank == 0) {
    g_send_buffer_released = false;
    {
      std::shared_ptr<float[]> memory(new float[kCount]);
      for (std::size_t i = 0; i < kCount; ++i) memory[i] = static_cast<float>(pattern(i));
      std::shared_ptr<void> owner(memory.get(), [memory](void*) { g_send_buffer_released = true; });
      const Buffer b = Buffer::view(memory.get(), {static_cast<std::int64_t>(kCount)},
                                    DType::Float32, Device::cpu(), {}, 0, owner);
      CollectiveOptions quick;
      quick.timeout = 300ms;
      caught_error(
          [&] {
            if (async)
              c->send_async(b, 1, 5, quick).wait();
            else
              c->send(b, 1, 5, quick);
          },
          ErrorCode::Timeout, {"send"}, "the send nobody receives yet");
    }
    RANK_CHECK(!g_send_buffer_released,
               "the failed send's buffer was let go while UCX could still read it");
    store->set_string(prefix + "failed", "1");
  } else {
    store->get_string(prefix + "failed", 60s);
    Buffer r = Buffer::allocate(kCount, DType::Float32);
    c->recv(r, 0, 5);
    expect_values(r, 0, kCount, pattern, "the message whose send timed out on rank 0");
  }
  // Rank 0 learns that the send ended through progress on the shared connections: both run
  // allreduces of "released yet?" until it says yes (the same count on both), at most 2000.
  Buffer released = Buffer::allocate(1, DType::Int32);
  for (int round = 0; round < 2000; ++round) {
    set(released, 0, env.rank == 0 && g_send_buffer_released ? 1.0 : 0.0);
    spare->allreduce(released, ReduceOp::Max);
    if (get(released, 0) != 0) break;
  }
  RANK_CHECK(get(released, 0) != 0, "the failed send's buffer was kept after the send ended");
}

TEST_CASE("a send that failed while UCX still had it keeps its buffer until it ended",
          "[comm][multiproc]") {
  for (const bool async : {false, true}) {
    CAPTURE(async);
    REQUIRE_NOTHROW(run_ranks(
        2, [async](const Environment& env) { failed_send_keeps_its_buffer(env, async); }));
  }
}

/// Forwards to a store, but each get() first sleeps 90% of its timeout (at most 3 s): a store,
/// or peers, answering every stage of connecting only just in time.
class JustInTimeStore final : public bootstrap::ForwardingStore {
 public:
  using ForwardingStore::ForwardingStore;
  Bytes get(std::string_view key, std::chrono::milliseconds timeout) override {
    std::this_thread::sleep_for(std::min<std::chrono::milliseconds>(timeout * 9 / 10, 3s));
    return inner().get(key, timeout / 10);
  }
  using Store::get;
};

TEST_CASE("Communicator::create keeps one deadline across its stages of connecting",
          "[comm][multiproc]") {
  // Rank 0's store answers each read (the host-span verdict, then each peer's address) after
  // 90% of the time it was given. With one deadline the reads shrink and create() ends at about
  // its 3 s timeout; with a fresh timeout per stage it took 2.7 s per read and a handshake after
  // them (over 8 s on 2 ranks). Rank 1 has a longer timeout, so it is still there for rank 0's
  // handshake whichever way that ends.
  constexpr auto kTimeout = 3s;
  REQUIRE_NOTHROW(run_ranks(2, [&](const Environment& env) {
    const std::shared_ptr<Store> plain = connect_store(env);
    CommunicatorOptions options;
    options.timeout = env.rank == 0 ? kTimeout : 3 * kTimeout;
    if (env.rank == 0) {
      const auto start = std::chrono::steady_clock::now();
      std::shared_ptr<Communicator> c;
      std::optional<Error> failed;
      try {
        c = Communicator::create(env, std::make_shared<JustInTimeStore>(plain), options);
      } catch (const Error& e) {
        failed = e;  // its own deadline: expected, though a handshake at the deadline may pass
      }
      const auto took = std::chrono::steady_clock::now() - start;  // before any teardown
      RANK_CHECK(
          took < kTimeout + 2500ms,
          "create() took " << std::chrono::duration_cast<std::chrono::milliseconds>(took).count()
                           << " ms with a " << kTimeout.count() << " s timeout");
      if (failed && failed->code() == ErrorCode::Timeout)
        RANK_CHECK(failed->message().find("Communicator::create: rank 0 of 2 was not connected "
                                          "within its 3000 ms timeout") != std::string::npos,
                   "the timeout does not say whose deadline passed: " << failed->what());
      plain->set_string("create_deadline/rank0-done", "1");
    } else {
      try {
        Communicator::create(env, plain, options);
      } catch (const Error&) {
        // Rank 0 gave up on it: expected, and not what this test is about.
      }
      plain->wait({"create_deadline/rank0-done"}, 60s);  // alive until rank 0 has measured
    }
  }));
}

TEST_CASE("a progress thread the system refuses fails its op and the communicator, not more",
          "[comm][multiproc]") {
  // Rank 0's first op that needs its communicator's progress thread cannot have one (the
  // testing seam throws as std::thread does when the system is out of threads): an
  // allreduce_async, or a recv_async. That op fails with SystemError naming the thread; the
  // communicator fails with it (its peers may run an op this rank cannot), so later ops,
  // blocking ones included and with threads to be had again, fail at once with that cause.
  // Before, the refused allreduce stayed queued and ran at the next op's thread start, and the
  // refused receive left the drive claimed: later ops waited out their deadline.
  const bool receive_first = GENERATE(false, true);
  CAPTURE(receive_first);
  REQUIRE_NOTHROW(run_ranks(2, [receive_first](const Environment& env) {
    auto world_comm = world(env);
    auto c = world_comm->dup();  // a communicator whose thread has not started yet
    if (env.rank == 0) {
      CollectiveOptions quick;
      quick.timeout = 5s;
      Buffer b = Buffer::allocate(16, DType::Float32);
      cohort::comm::testing::refuse_progress_threads(true);
      expect_error(
          [&] {
            if (receive_first) {
              (void)c->recv_async(b, 1, 3, quick);
            } else {
              (void)c->allreduce_async(b, b, ReduceOp::Sum, quick);
            }
          },
          ErrorCode::SystemError, {receive_first ? "recv" : "allreduce", "progress thread"},
          "the op that needed a thread");
      cohort::comm::testing::refuse_progress_threads(false);
      RANK_CHECK(c->is_poisoned(), "the communicator was not failed with its op");
      expect_error([&] { c->barrier(quick); }, ErrorCode::InvalidUsage,
                   {"could not start its progress thread"}, "a later barrier");
      expect_error([&] { c->recv(b, 1, 3, quick); }, ErrorCode::InvalidUsage,
                   {"could not start its progress thread"}, "a later receive");
      expect_error([&] { c->allreduce_async(b, b, ReduceOp::Sum, quick).wait(); },
                   ErrorCode::InvalidUsage, {"could not start its progress thread"},
                   "a later allreduce_async");
    }
    world_comm->barrier();  // rank 1 makes no call on `c`
  }));
}

TEST_CASE("COHORT_DEBUG=detail on one rank only turns it on for every rank", "[comm][multiproc]") {
  REQUIRE_NOTHROW(run_ranks(3, [](const Environment& env) {
    // Only rank 1 asks; unagreed, its fingerprint messages would never be answered.
    if (env.rank == 1)
      ::setenv("COHORT_DEBUG", "detail", 1);
    else
      ::unsetenv("COHORT_DEBUG");
    auto c = world(env);
    allreduce_works(*c, "allreduce with debug asked by one rank");  // op #0
    const std::size_t count = env.rank == 0 ? 12 : 10;
    Buffer b = Buffer::allocate(count, DType::Float32);
    expect_error([&] { c->allreduce(b, ReduceOp::Sum); }, ErrorCode::InvalidArgument,
                 {"allreduce #1", "rank 0 has count=12", "rank 1 has count=10"},
                 "count mismatch caught on every rank");
    // Forcing different algorithms would exchange messages no peer expects.
    CollectiveOptions forced;
    forced.algorithm = env.rank == 0 ? Algorithm::Ring : Algorithm::RecursiveDoubling;
    Buffer ten = Buffer::allocate(10, DType::Float32);
    expect_error(
        [&] { c->allreduce(ten, ReduceOp::Sum, forced); }, ErrorCode::InvalidArgument,
        {"allreduce #2", "rank 0 has algorithm=ring", "rank 1 has algorithm=recursive_doubling"},
        "forced algorithms differ");
    allreduce_works(*c, "allreduce after the mismatches");
  }));
}

TEST_CASE("without COHORT_DEBUG, ranks disagreeing on the shared-memory path fail on every rank",
          "[comm][multiproc]") {
  // Rank 0 allreduces 100 floats, the others 100000: before announcements, rank 0 returned "ok"
  // and its next allreduce returned wrong values. Now the ranks that meet the disagreement fail
  // with InvalidArgument naming both calls; the communicator is unusable afterwards (the arena's
  // pieces are out of step), every later op says so.
  const int size = GENERATE(2, 3);
  CAPTURE(size);
  REQUIRE_NOTHROW(run_ranks(size, [](const Environment& env) {
    ::unsetenv("COHORT_DEBUG");
    ScopedEnv shm("COHORT_SHARED_MEMORY", "auto");
    auto c = world(env);
    allreduce_works(*c, "before");  // sets the arena up
    const std::size_t count = env.rank == 0 ? 100 : 100000;
    Buffer b = Buffer::allocate(count, DType::Float32);
    CollectiveOptions quick;
    quick.timeout = 60s;
    bool failed = false;
    try {
      c->allreduce(b, ReduceOp::Sum, quick);
    } catch (const Error& e) {
      failed = true;
      RANK_CHECK(e.code() == ErrorCode::InvalidArgument,
                 "code " << error_code_name(e.code()) << ": " << e.what());
      RANK_CHECK(e.message().find("allreduce of 400 bytes") != std::string::npos &&
                     e.message().find("allreduce of 400000 bytes") != std::string::npos,
                 "message names both calls: " << e.message());
    }
    RANK_CHECK(failed, "rank " << env.rank << " returned from a disagreeing allreduce");
    expect_error([&] { c->allreduce(b, ReduceOp::Sum, quick); }, ErrorCode::InvalidUsage,
                 {"unusable"}, "later op");
  }));
}

TEST_CASE(
    "single copy: ranks whose allgatherv counts disagree all fail at once, naming the lengths",
    "[comm][multiproc]") {
  // Rank 0 thinks rank 0 sends 1 element and rank 1 sends 3; the others think every rank sends
  // 2. The totals agree, so the arena's announcements match; what the readers find in the
  // owners' tables does not.
  if (!single_copy_runs_here()) return;
  const int size = GENERATE(2, 3);
  CAPTURE(size);
  run_single_copy_ranks(size, [](const Environment& env, Communicator& c) {
    const DisagreeingCounts v(env);
    bool failed = false;
    try {
      c.allgatherv(v.in, v.out, v.counts, v.forced);
    } catch (const Error& e) {
      failed = true;
      RANK_CHECK(e.code() == ErrorCode::InvalidArgument,
                 "code " << error_code_name(e.code()) << ": " << e.what());
      // Rank 0 expects 12 bytes from rank 1, which has 8; the others expect 8 from rank 0's 4.
      const std::string lengths =
          env.rank == 0
              ? "rank 1 has 8 bytes for rank 0, which expects 12"
              : "rank 0 has 4 bytes for rank " + std::to_string(env.rank) + ", which expects 8";
      // A rank that met a disagreeing length names it; one that first met a peer's failure
      // (the peer marks its flags as it fails) says so.
      RANK_CHECK(
          e.message().find(lengths) != std::string::npos ||
              e.message().find("found that the ranks disagree about this op") != std::string::npos,
          "message names both lengths (" << lengths
                                         << ") or the peer that found them: " << e.message());
    }
    RANK_CHECK(failed, "rank " << env.rank << " returned from a disagreeing allgatherv");
  });
}

TEST_CASE("single copy: a disagreement only the root sees still fails the others' next op at once",
          "[comm][multiproc]") {
  // gatherv: the root thinks rank 1 sends 3 elements, rank 1 sends 2. Only the root reads, so
  // only it finds out; it marks its flags as it fails, and the others' next op fails on that
  // mark instead of waiting for its deadline.
  if (!single_copy_runs_here()) return;
  const int size = GENERATE(2, 3);
  CAPTURE(size);
  run_single_copy_ranks(size, [](const Environment& env, Communicator& c) {
    const DisagreeingCounts v(env);
    if (env.rank == 0) {
      expect_error([&] { c.gatherv(v.in, v.out, v.counts, 0, v.forced); },
                   ErrorCode::InvalidArgument, {"rank 1 has 8 bytes for rank 0, which expects 12"},
                   "the root's gatherv");
    } else {
      // Nothing wrong is seen here, unless the root's mark comes before its release is seen:
      // then this gatherv fails, and otherwise the next op does.
      Buffer b = Buffer::allocate(4, DType::Float32);
      CollectiveOptions quick;
      quick.timeout = 60s;
      expect_error(
          [&] {
            c.gatherv(v.in, v.out, v.counts, 0, v.forced);
            c.allreduce(b, ReduceOp::Sum, quick);
          },
          ErrorCode::InvalidArgument, {"rank 0 found that the ranks disagree"},
          "this gatherv or the next op");
    }
  });
}

TEST_CASE("an arena reduce whose ranks disagree about the root fails on every rank",
          "[comm][multiproc]") {
  // 64 KiB, one piece of the root scheme, where only the root reduces: each rank names the other
  // as the root, so both act as non-roots, and neither may return as if the reduce had run.
  REQUIRE_NOTHROW(run_ranks(2, [](const Environment& env) {
    ::unsetenv("COHORT_DEBUG");  // the arena must find it, not COHORT_DEBUG's cross-check
    ScopedEnv shm("COHORT_SHARED_MEMORY", "auto");
    auto c = world(env);
    allreduce_works(*c, "before");  // sets the arena up
    Buffer in = Buffer::allocate(16384, DType::Float32);
    Buffer out = Buffer::allocate(16384, DType::Float32);
    CollectiveOptions forced;
    forced.algorithm = Algorithm::SharedMemory;
    forced.timeout = 60s;
    const auto start = std::chrono::steady_clock::now();
    expect_error([&] { c->reduce(in, out, ReduceOp::Sum, 1 - env.rank, forced); },
                 ErrorCode::InvalidArgument, {"disagree", "reduce of 65536 bytes"},
                 "a reduce naming two roots");
    RANK_CHECK(std::chrono::steady_clock::now() - start < 30s, "failed before the deadline");
  }));
}

TEST_CASE(
    "a measured broadcast whose ranks disagree about its length fails on every rank, naming the "
    "root's call and its form",
    "[comm][multiproc]") {
  // Both lengths are measured (from 1 MiB), so the others wait for the root's first flag to learn
  // the form of its call, and find another op there: they must fail, not follow it.
  if (!single_copy_runs_here()) return;
  const int size = GENERATE(2, 3);
  CAPTURE(size);
  REQUIRE_NOTHROW(run_ranks(size, [](const Environment& env) {
    ::unsetenv("COHORT_DEBUG");  // the arena must find it, not COHORT_DEBUG's cross-check
    ScopedEnv shm("COHORT_SHARED_MEMORY", "auto");
    ScopedEnv single("COHORT_SINGLE_COPY", "auto");
    ScopedEnv measured("COHORT_MEASURED_CHOICE", std::nullopt);
    ScopedEnv algo("COHORT_ALGO", std::nullopt);
    auto c = world(env);
    allreduce_works(*c, "before");                              // sets the arena up
    const std::size_t count = env.rank == 0 ? 262144 : 524288;  // 1 MiB at the root, else 2
    Buffer b = Buffer::allocate(count, DType::Float32);
    CollectiveOptions quick;
    quick.timeout = 60s;
    const auto start = std::chrono::steady_clock::now();
    expect_error([&] { c->broadcast(b, 0, quick); }, ErrorCode::InvalidArgument,
                 {"disagree", "broadcast of 1048576 bytes (float, root 0, in place at the root",
                  "broadcast of 2097152 bytes"},
                 "a broadcast of two lengths");
    RANK_CHECK(std::chrono::steady_clock::now() - start < 30s, "failed before the deadline");
  }));
}

TEST_CASE("single copy: an allreduce whose ranks disagree about the count fails on every rank",
          "[comm][multiproc]") {
  // The allreduce's two steps read at offsets every rank computes from its own count, so a
  // disagreement must stop it before any copy: the op's announcement carries its bytes.
  if (!single_copy_runs_here()) return;
  const int size = GENERATE(2, 3);
  CAPTURE(size);
  run_single_copy_ranks(size, [](const Environment& env, Communicator& c) {
    Buffer b = Buffer::allocate(env.rank == 0 ? 1024 : 2048, DType::Float32);
    CollectiveOptions forced;
    forced.algorithm = Algorithm::SingleCopy;
    forced.timeout = 60s;
    expect_error([&] { c.allreduce(b, ReduceOp::Sum, forced); }, ErrorCode::InvalidArgument,
                 {"single copy", "allreduce of"}, "an allreduce of disagreeing counts");
  });
}

TEST_CASE("single copy: ranks running one broadcast by different arena algorithms all fail",
          "[comm][multiproc]") {
  // The slots hold address tables under single copy and data under shared memory: each
  // announces itself apart, so neither takes the other's for its own.
  if (!single_copy_runs_here()) return;
  REQUIRE_NOTHROW(run_ranks(2, [](const Environment& env) {
    auto c = single_copy_world(env);
    Buffer b = Buffer::allocate(16384, DType::Float32);
    CollectiveOptions forced;
    forced.algorithm = env.rank == 0 ? Algorithm::SingleCopy : Algorithm::SharedMemory;
    forced.timeout = 60s;
    expect_error([&] { c->broadcast(b, 0, forced); }, ErrorCode::InvalidArgument,
                 {"single copy", "broadcast of 65536 bytes"}, "mixed algorithms");
  }));
}

TEST_CASE("a forked child may drop its copy of a communicator; the parent's goes on",
          "[comm][multiproc]") {
  // The child's copy names threads the child does not have and rings the parent and its peers
  // use: destroying it must neither hang the child nor touch what the others share.
  for (int size : {2, 3}) {
    REQUIRE_NOTHROW(run_ranks(size, [](const Environment& env) {
      std::shared_ptr<Communicator> c = world(env);
      const int n = c->size();
      const int next = (env.rank + 1) % n, prev = (env.rank + n - 1) % n;
      const auto exchange = [&](int round) {
        // Small messages (the shared-memory rings) and a collective.
        Buffer out = Buffer::allocate(16, DType::Int32), in = Buffer::allocate(16, DType::Int32);
        for (std::size_t i = 0; i < 16; ++i)
          out.data_as<std::int32_t>()[i] = env.rank * 100 + round;
        c->sendrecv(out, next, in, prev, round);
        for (std::size_t i = 0; i < 16; ++i)
          RANK_CHECK(
              in.data_as<std::int32_t>()[i] == prev * 100 + round,
              "round " << round << ": element " << i << " is " << in.data_as<std::int32_t>()[i]);
        Buffer sum = Buffer::allocate(1000, DType::Int64);
        for (std::size_t i = 0; i < 1000; ++i) sum.data_as<std::int64_t>()[i] = env.rank + 1;
        c->allreduce(sum, ReduceOp::Sum);
        RANK_CHECK(sum.data_as<std::int64_t>()[999] == n * (n + 1) / 2,
                   "round " << round << ": sum " << sum.data_as<std::int64_t>()[999]);
      };
      exchange(1);
      // A receive in flight at the fork: rank 1 sends it only after the child is done.
      Buffer late = Buffer::allocate(4, DType::Int32);
      Work pending;
      if (env.rank == 0) pending = c->recv_async(late, 1, 77);
      if (env.rank == 0) {
        test::ForkedChild child([&c, &pending] {
          // Waiting on the parent's op would never end here: refused at once.
          try {
            pending.wait();
            return 2;
          } catch (const Error& e) {
            if (e.code() != ErrorCode::InvalidUsage) return 3;
          }
          pending = Work();
          if (c.use_count() != 1) return 4;
          c.reset();  // the last owner in the child: the destructor runs there
          return 0;
        });
        const int status = child.join(std::chrono::seconds(30));
        RANK_CHECK(status == 0, "the child ended with " << status);
      }
      c->barrier();
      if (env.rank == 1) {
        Buffer sent = Buffer::allocate(4, DType::Int32);
        for (std::size_t i = 0; i < 4; ++i) sent.data_as<std::int32_t>()[i] = 4242;
        c->send(sent, 0, 77);
      }
      if (env.rank == 0) {
        pending.wait();
        RANK_CHECK(late.data_as<std::int32_t>()[3] == 4242, "the receive in flight at the fork");
      }
      for (int round = 2; round < 6; ++round) exchange(round);
    }));
  }
}
