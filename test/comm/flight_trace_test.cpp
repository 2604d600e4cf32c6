// The flight recorder with real ranks (cohort::launch), three ways a job goes wrong at collective
// #3 after agreeing on #0-#2, each dumped by a different trigger; the ranks' records are then
// judged by cohort-trace's verdict, which must name the right rank and op:
// - a rank skips allreduce #3: the others fail (dump on failure), it dumps on request;
// - a rank freezes inside allreduce #3 (its process stopped mid-op): the others fail, it dumps on
//   SIGUSR1 once resumed, still inside the op;
// - a rank calls broadcast #3 where the others call allreduce #3: every rank dumps on request.

#include "cohort_trace/flight_dump.hpp"
#include "cohort_trace/trace_verdict.hpp"
#include "file_appears.hpp"
#include "rank_checks.hpp"
#include "support/blocked_thread.hpp"
#include "support/scoped_env.hpp"
#include "support/temp_dir.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <sched.h>
#include <csignal>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

namespace {

using namespace cohort;
using namespace cohort::test;
using namespace std::chrono_literals;

constexpr int kRanks = 3;

// Collectives #0-#2, the same on every rank; #2 goes through the progress thread (queued).
void agree(Communicator& c) {
  Buffer b = Buffer::allocate(10, DType::Int32);
  c.allreduce(b, ReduceOp::Sum);
  c.barrier();
  c.broadcast_async(b, b, 0).wait();
}

std::vector<std::string> keys(const std::string& prefix, std::initializer_list<int> ranks) {
  std::vector<std::string> result;
  for (int r : ranks) result.push_back(prefix + "/" + std::to_string(r));
  return result;
}

// Runs `fn` and requires a Timeout or RemoteError naming `what` (which of the two depends on
// whether a peer gave up first).
void expect_failure(const std::function<void()>& fn, const std::string& what) {
  try {
    fn();
  } catch (const Error& e) {
    RANK_CHECK(e.code() == ErrorCode::Timeout || e.code() == ErrorCode::RemoteError, e.what());
    RANK_CHECK(e.message().find(what) != std::string::npos, e.what());
    return;
  }
  throw std::runtime_error(what + " did not fail");
}

// Waits until process `pid` is stopped (state T in /proc/<pid>/stat): a state, which no file
// descriptor announces, so it is polled between sched_yield()s as blocked_thread.cpp does.
bool wait_until_stopped(pid_t pid, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
    const std::size_t paren = text.rfind(')');  // the command name may hold spaces
    if (paren != std::string::npos && paren + 2 < text.size() && text[paren + 2] == 'T')
      return true;
    sched_yield();
  }
  return false;
}

// The verdict over every record in `dir`, which must hold one per rank of communicator 0.
trace::Verdict verdict_of(const TempDir& dir) {
  std::vector<std::string> problems;
  const std::vector<trace::RankDump> dumps = trace::read_dumps({dir.path()}, problems);
  CAPTURE(problems);
  REQUIRE(problems.empty());
  REQUIRE(dumps.size() == static_cast<std::size_t>(kRanks));
  const std::vector<trace::Verdict> verdicts = trace::judge(dumps);
  REQUIRE(verdicts.size() == 1);
  INFO(trace::format_verdicts(verdicts));
  return verdicts.front();
}

std::string reason_of(const TempDir& dir, int rank) {
  std::vector<std::string> problems;
  for (const trace::RankDump& d : trace::read_dumps({dir.path()}, problems))
    if (d.rank == rank) return d.reason;
  return "none";
}

}  // namespace

TEST_CASE("a rank that skips a collective: the verdict says it never entered",
          "[comm][multiproc][trace]") {
  const TempDir dir("cohort-flight-trace");
  const ScopedEnv trace_dir("COHORT_TRACE_DIR", dir.path().string());
  REQUIRE_NOTHROW(run_ranks(kRanks, [&](const Environment& env) {
    std::shared_ptr<Store> store = connect_store(env);
    auto c = Communicator::create(env, store);
    agree(*c);
    if (env.rank == 2) {
      // Skips allreduce #3 and waits (outside cohort) until the others have given up on it.
      store->wait(keys("failed", {0, 1}), 60s);
      const std::string path = c->dump_trace();
      RANK_CHECK(path.rfind(dir.path().string() + "/cohort-trace.", 0) == 0, path);
    } else {
      CollectiveOptions two_seconds;
      two_seconds.timeout = 2s;
      Buffer f4 = Buffer::allocate(4, DType::Float32);
      expect_failure([&] { c->allreduce(f4, ReduceOp::Sum, two_seconds); }, "allreduce #3");
      store->set_string("failed/" + std::to_string(env.rank), "1");
    }
    // Nobody leaves while another may still be in a collective with it.
    store->set_string("done/" + std::to_string(env.rank), "1");
    store->wait(keys("done", {0, 1, 2}), 60s);
  }));
  const trace::Verdict v = verdict_of(dir);
  CHECK(v.kind == trace::VerdictKind::Behind);
  CHECK(v.seq == 3u);
  CHECK(v.op == "allreduce");
  CHECK(v.culprits == std::vector<int>{2});
  CHECK_THAT(v.headline, Catch::StartsWith("rank 2 never entered allreduce #3; ranks 0,1 waited "));
  // Ranks 0 and 1 dumped as they failed; rank 2 when asked.
  CHECK(reason_of(dir, 0) == "failure");
  CHECK(reason_of(dir, 1) == "failure");
  CHECK(reason_of(dir, 2) == "request");
}

TEST_CASE("a rank frozen inside a collective: the verdict says it froze there",
          "[comm][multiproc][trace]") {
  const TempDir dir("cohort-flight-trace");
  const ScopedEnv trace_dir("COHORT_TRACE_DIR", dir.path().string());
  // The frozen rank's wait must reach its event-fd sleep (that is how its helper knows it is
  // inside the op): no shared-memory naps, no spinning first.
  const ScopedEnv shared_memory("COHORT_SHARED_MEMORY", "off");
  const ScopedEnv spin("COHORT_SPIN_US", "0");
  REQUIRE_NOTHROW(run_ranks(kRanks, [&](const Environment& env) {
    std::shared_ptr<Store> store = connect_store(env);
    CommunicatorOptions options;
    options.timeout = 60s;  // the frozen rank's own deadline never comes during the test
    auto c = Communicator::create(env, store, options);
    agree(*c);
    // A ring: every step needs the previous step's data, so no rank can finish #3 with what
    // rank 1 posted before it froze, and rank 1 cannot once the others gave up. Small enough
    // for eager messages: a rendezvous that rank 1 completes after it is resumed would read
    // buffers the others released when they gave up (UCX aborts on that).
    CollectiveOptions ring;
    ring.algorithm = Algorithm::Ring;
    Buffer data = Buffer::allocate(3 * 64, DType::Float32);
    if (env.rank == 1) {
      store->set_string("frozen_pid", std::to_string(::getpid()));
      const pid_t main_thread = current_thread_id();
      // Where its SIGUSR1 record goes (Communicator::dump_trace() documents the name).
      const std::filesystem::path record =
          dir.path() /
          ("cohort-trace." + (env.job_id.empty() ? std::to_string(::getpid()) : env.job_id) +
           ".comm0.rank1.json");
      std::thread freezer([&] {
        // Once the main thread sleeps inside allreduce #3, stop the whole process there.
        if (!wait_until_blocked(main_thread, BlockedIn::FileDescriptor, 30s)) std::_Exit(3);
        std::raise(SIGSTOP);
        // Resumed by rank 0 once the others gave up: asked for a record as a hung job would be.
        std::raise(SIGUSR1);
        if (!wait_for_file(record, 30s)) std::_Exit(4);
        store->set_string("dumped/1", "1");
        // The main thread is still inside #3 (until its 60 s deadline): leave from here.
        std::_Exit(0);
      });
      freezer.detach();
      c->allreduce(data, ReduceOp::Sum, ring);
      std::_Exit(5);  // allreduce #3 completed: it must not have
    }
    const auto frozen = static_cast<pid_t>(std::stol(store->get_string("frozen_pid", 30s)));
    RANK_CHECK(wait_until_stopped(frozen, 30s), "rank 1 (pid " << frozen << ") never stopped");
    ring.timeout = 2s;
    expect_failure([&] { c->allreduce(data, ReduceOp::Sum, ring); }, "allreduce #3");
    store->set_string("failed/" + std::to_string(env.rank), "1");
    if (env.rank == 0) {
      store->wait(keys("failed", {0, 2}), 60s);
      RANK_CHECK(::kill(frozen, SIGCONT) == 0, "SIGCONT");
    }
    store->wait({"dumped/1"}, 60s);
  }));
  const trace::Verdict v = verdict_of(dir);
  CHECK(v.kind == trace::VerdictKind::Stuck);
  CHECK(v.seq == 3u);
  CHECK(v.culprits == std::vector<int>{1});
  CHECK_THAT(v.headline,
             Catch::StartsWith("rank 1 froze in allreduce #3: entered, never finished"));
  CHECK_THAT(v.headline, Catch::Contains("; ranks 0,2 failed after "));
  CHECK(reason_of(dir, 1) == "signal");
}

TEST_CASE("ranks calling different collectives: the verdict says who diverged",
          "[comm][multiproc][trace]") {
  const TempDir dir("cohort-flight-trace");
  const ScopedEnv trace_dir("COHORT_TRACE_DIR", dir.path().string());
  // Mismatched collectives meet in UCX messages, whose sizes are checked, rather than in one
  // shared segment's slots.
  const ScopedEnv shared_memory("COHORT_SHARED_MEMORY", "off");
  REQUIRE_NOTHROW(run_ranks(kRanks, [&](const Environment& env) {
    std::shared_ptr<Store> store = connect_store(env);
    auto c = Communicator::create(env, store);
    agree(*c);
    CollectiveOptions two_seconds;
    two_seconds.timeout = 2s;
    Buffer f4 = Buffer::allocate(4, DType::Float32);
    try {
      if (env.rank == 1) {
        c->broadcast(f4, 0, two_seconds);
      } else {
        c->allreduce(f4, ReduceOp::Sum, two_seconds);
      }
    } catch (const Error&) {
      // Whether a mismatched call fails or completes with garbage depends on the algorithms;
      // either way the records show what each rank called.
    }
    c->dump_trace();
    store->set_string("done/" + std::to_string(env.rank), "1");
    store->wait(keys("done", {0, 1, 2}), 60s);
  }));
  const trace::Verdict v = verdict_of(dir);
  CHECK(v.kind == trace::VerdictKind::Diverged);
  CHECK(v.seq == 3u);
  CHECK(v.culprits == std::vector<int>{1});
  CHECK(v.headline ==
        "diverged at #3: rank 1 called broadcast #3 (float x 4, root 0); ranks 0,2 called "
        "allreduce #3 (float x 4, sum)");
}

TEST_CASE("a receive that fails after agreed collectives: the verdict names the receive",
          "[comm][multiproc][trace]") {
  const TempDir dir("cohort-flight-trace");
  const ScopedEnv trace_dir("COHORT_TRACE_DIR", dir.path().string());
  REQUIRE_NOTHROW(run_ranks(kRanks, [&](const Environment& env) {
    std::shared_ptr<Store> store = connect_store(env);
    auto c = Communicator::create(env, store);
    agree(*c);
    if (env.rank == 0) {
      // Receive #0, which nobody sends: it fails at its deadline and rank 0 dumps. Sends and
      // receives are numbered apart from collectives: allreduce #0 must stay done.
      CollectiveOptions quick;
      quick.timeout = 300ms;
      Buffer never = Buffer::allocate(2, DType::Int64);
      expect_error([&] { c->recv(never, 1, 4, quick); }, ErrorCode::Timeout,
                   {"recv #0 from rank 1 (tag 4)"}, "the receive nobody sends to");
    } else {
      store->wait(keys("failed", {0}), 60s);  // the same key rank 0 sets below
      c->dump_trace();
    }
    if (env.rank == 0) store->set_string("failed/0", "1");
    store->set_string("done/" + std::to_string(env.rank), "1");
    store->wait(keys("done", {0, 1, 2}), 60s);
  }));
  const trace::Verdict v = verdict_of(dir);
  CHECK(v.kind == trace::VerdictKind::Failed);
  CHECK(v.headline == "collectives agree; rank 0 failed in recv #0 from rank 1 (tag 4) (timeout)");
  CHECK(reason_of(dir, 0) == "failure");
}

TEST_CASE(
    "a send that times out while a collective waits: the record names the send, not the "
    "collective it interrupted",
    "[comm][multiproc][trace]") {
  const TempDir dir("cohort-flight-trace");
  REQUIRE_NOTHROW(run_ranks(2, [&](const Environment& env) {
    std::shared_ptr<Store> store = connect_store(env);
    auto c = Communicator::create(env, store);
    Buffer b = Buffer::allocate(4, DType::Int32);
    c->allreduce(b, ReduceOp::Sum);  // the shared arena set up
    if (env.rank == 0) {
      // Large enough not to leave eagerly: it waits for a receive rank 1 never posts, and its
      // deadline passes while the allreduce (which rank 1 never enters) waits.
      CollectiveOptions quick;
      quick.timeout = 300ms;
      Buffer big = Buffer::allocate(std::size_t{1} << 21, DType::Float32);
      Work sent = c->send_async(big, 1, 9, quick);
      CollectiveOptions patient;
      patient.timeout = 30s;
      bool failed = false;
      try {
        c->allreduce(b, ReduceOp::Sum, patient);
      } catch (const Error&) {
        failed = true;
      }
      RANK_CHECK(failed, "the allreduce went on past the send's failure");
      const std::string path = (dir.path() / "rank0.json").string();
      c->dump_trace(path);
      std::ifstream in(path);
      const nlohmann::json failure = nlohmann::json::parse(in).at("failure");
      RANK_CHECK(failure.at("op") == "send" && failure.at("code") == "timeout",
                 "the record's failure is " << failure.dump());
      store->set_string("checked", "1");
    } else {
      store->wait({"checked"}, 60s);
    }
  }));
}
