// The flight recorder in one process: what one collective's entry holds through its life, the
// ring's order and overwriting, the dump's fields and file names, the first-failure dump, SIGUSR1
// (also after fork) and dumps racing with recording; then a world of one through the public
// Communicator::dump_trace(). Expected values are written out by hand.

#include <cohort/communicator.hpp>
#include <cohort/error.hpp>

#include "comm/flight_recorder.hpp"
#include "file_appears.hpp"
#include "support/forked_child.hpp"
#include "support/scoped_env.hpp"
#include "support/temp_dir.hpp"

#include "support/scoped_env.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

namespace {

using cohort::test::clear_launcher_variables;

using namespace cohort;
using namespace cohort::comm;
using namespace std::chrono_literals;
using cohort::test::ScopedEnv;
using cohort::test::TempDir;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

json read_json(const std::string& path) {
  std::ifstream in(path);
  REQUIRE(in);
  return json::parse(in);
}

OpShape shape(std::optional<DType> dtype, std::optional<ReduceOp> op, int root,
              std::uint64_t count) {
  OpShape s;
  s.dtype = dtype;
  s.reduce_op = op;
  s.root = root;
  s.count = count;
  return s;
}

std::vector<std::uint32_t> seqs_of(const json& dump) {
  std::vector<std::uint32_t> seqs;
  for (const json& op : dump.at("ops")) seqs.push_back(op.at("seq").get<std::uint32_t>());
  return seqs;
}

/// Places where a dump's sequence numbers skip one: 0 for a whole copy.
int gaps_in(const json& dump) {
  const std::vector<std::uint32_t> seqs = seqs_of(dump);
  int gaps = 0;
  for (std::size_t i = 1; i < seqs.size(); ++i)
    if (seqs[i] != seqs[i - 1] + 1) ++gaps;
  return gaps;
}

}  // namespace

TEST_CASE("one collective's life: queued, started, done, with its arguments", "[comm][trace]") {
  FlightRecorder recorder({"job-7", 3, 1, 2}, 4, "");
  const Clock::time_point t0 = Clock::now();
  recorder.queued(0, Collective::Allreduce, Algorithm::Auto,
                  shape(DType::Float32, ReduceOp::Sum, -1, 10), 5000ms, t0);
  // The driver takes the op from the queue: its queued time comes along.
  recorder.started(0, Collective::Allreduce, Algorithm::Auto,
                   shape(DType::Float32, ReduceOp::Sum, -1, 10), 5000ms, t0 + 1ms, t0);
  recorder.done(0, Algorithm::Ring, t0 + 3ms);
  // Run inline: never queued; a forced algorithm shows until another is known.
  recorder.started(1, Collective::Broadcast, Algorithm::Tree,
                   shape(DType::Int32, std::nullopt, 1, 7), 250ms, t0 + 4ms);

  const json dump = json::parse(recorder.to_json(DumpReason::Request));
  CHECK(dump.at("format") == "cohort-flight-record");
  CHECK(dump.at("version") == 1);
  CHECK(dump.at("job") == "job-7");
  CHECK(dump.at("pid") == ::getpid());
  CHECK(dump.at("communicator") == 3);
  CHECK(dump.at("rank") == 1);
  CHECK(dump.at("size") == 2);
  CHECK(dump.at("reason") == "request");
  CHECK(dump.at("capacity") == 4);
  CHECK(dump.at("recorded") == 2);
  CHECK(dump.at("failure").is_null());
  REQUIRE(dump.at("ops").size() == 2);

  const json& first = dump.at("ops")[0];
  CHECK(first.at("seq") == 0);
  CHECK(first.at("op") == "allreduce");
  CHECK(first.at("dtype") == "float");
  CHECK(first.at("reduce_op") == "sum");
  CHECK(first.at("count") == 10);
  CHECK(first.at("root").is_null());
  CHECK(first.at("algorithm") == "ring");
  CHECK(first.at("state") == "done");
  CHECK(first.at("timeout_ms") == 5000);
  // Whole milliseconds apart on the steady clock: exactly that many microseconds in the dump.
  CHECK(first.at("started_us").get<std::int64_t>() - first.at("queued_us").get<std::int64_t>() ==
        1000);
  CHECK(first.at("finished_us").get<std::int64_t>() - first.at("started_us").get<std::int64_t>() ==
        2000);
  CHECK(first.at("awaited_peers") == json::array());

  const json& second = dump.at("ops")[1];
  CHECK(second.at("seq") == 1);
  CHECK(second.at("op") == "broadcast");
  CHECK(second.at("dtype") == "int32");
  CHECK(second.at("reduce_op").is_null());
  CHECK(second.at("root") == 1);
  CHECK(second.at("count") == 7);
  CHECK(second.at("algorithm") == "tree");
  CHECK(second.at("state") == "started");
  CHECK(second.at("queued_us") == second.at("started_us"));
  CHECK(second.at("finished_us").is_null());
  // The stamps are wall-clock microseconds: within a minute of now.
  const auto now_us = std::chrono::duration_cast<std::chrono::microseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  CHECK(std::abs(second.at("started_us").get<std::int64_t>() - now_us) < 60'000'000);
}

TEST_CASE("a failed op keeps the peers and the algorithm its error names", "[comm][trace]") {
  FlightRecorder recorder({"", 0, 0, 16}, 8, "");
  const Clock::time_point t0 = Clock::now();
  recorder.started(4, Collective::Allgather, Algorithm::Auto,
                   shape(DType::Float64, std::nullopt, -1, 3), 2000ms, t0);
  recorder.failed(
      4, Error(ErrorCode::Timeout, "no reply", ErrorContext{.algorithm = "bruck", .peers = {2, 5}}),
      t0 + 2000ms);
  recorder.started(5, Collective::Barrier, Algorithm::Auto, OpShape{}, 2000ms, t0);
  std::vector<int> many;
  for (int p = 1; p <= 10; ++p) many.push_back(p);
  recorder.failed(5, Error(ErrorCode::RemoteError, "gone", ErrorContext{.peers = many}), t0);

  const json dump = json::parse(recorder.to_json(DumpReason::Request));
  REQUIRE(dump.at("ops").size() == 2);
  const json& gather = dump.at("ops")[0];
  CHECK(gather.at("state") == "failed");
  CHECK(gather.at("algorithm") == "bruck");
  CHECK(gather.at("awaited_peers") == json({2, 5}));
  CHECK_FALSE(gather.contains("awaited_peers_total"));
  CHECK(gather.at("finished_us").get<std::int64_t>() -
            gather.at("started_us").get<std::int64_t>() ==
        2'000'000);
  const json& barrier = dump.at("ops")[1];
  CHECK(barrier.at("op") == "barrier");
  CHECK(barrier.at("dtype").is_null());
  CHECK(barrier.at("count") == 0);
  // Eight listed, ten counted.
  CHECK(barrier.at("awaited_peers") == json({1, 2, 3, 4, 5, 6, 7, 8}));
  CHECK(barrier.at("awaited_peers_total") == 10);
}

TEST_CASE("the ring keeps the newest ops, oldest first", "[comm][trace]") {
  const Clock::time_point t0 = Clock::now();
  SECTION("five ops through a ring of three") {
    FlightRecorder recorder({"", 0, 0, 2}, 3, "");
    for (std::uint32_t seq = 0; seq < 5; ++seq) {
      recorder.started(seq, Collective::Allreduce, Algorithm::Auto,
                       shape(DType::Float32, ReduceOp::Sum, -1, seq), 1000ms, t0);
      recorder.done(seq, Algorithm::Ring, t0);
    }
    // Op 0's slot now holds op 3: a late update of op 0 must not touch it.
    recorder.failed(0, Error(ErrorCode::Timeout, "late"), t0);
    const json dump = json::parse(recorder.to_json(DumpReason::Request));
    CHECK(seqs_of(dump) == std::vector<std::uint32_t>{2, 3, 4});
    CHECK(dump.at("recorded") == 5);
    for (const json& op : dump.at("ops")) CHECK(op.at("state") == "done");
  }
  SECTION("rings of several sizes keep exactly the newest `capacity` ops") {
    // Every op must land in a slot of its own: a wrong slot mapping loses some of them.
    for (const std::uint32_t capacity : {1u, 2u, 7u, 64u, 2000u, 4099u}) {
      CAPTURE(capacity);
      FlightRecorder recorder({"", 0, 0, 2}, capacity, "");
      const std::uint32_t total = 3 * capacity + 5;
      for (std::uint32_t seq = 0; seq < total; ++seq) {
        recorder.started(seq, Collective::Barrier, Algorithm::Auto, OpShape{}, 1000ms, t0);
        recorder.done(seq, Algorithm::Dissemination, t0);
      }
      std::vector<std::uint32_t> newest;
      for (std::uint32_t seq = total - capacity; seq < total; ++seq) newest.push_back(seq);
      const json dump = json::parse(recorder.to_json(DumpReason::Request));
      CHECK(seqs_of(dump) == newest);
      for (const json& op : dump.at("ops")) CHECK(op.at("state") == "done");
    }
  }
  SECTION("more ops queued than slots: the running one still shows, and the newest queued") {
    // Op 2's queued record took op 0's slot; op 0, started, shows from the driver's ring.
    FlightRecorder recorder({"", 0, 0, 2}, 2, "");
    for (std::uint32_t seq = 0; seq < 3; ++seq)
      recorder.queued(seq, Collective::Barrier, Algorithm::Auto, OpShape{}, 1000ms, t0);
    recorder.started(0, Collective::Barrier, Algorithm::Auto, OpShape{}, 1000ms, t0 + 1ms, t0);
    const json dump = json::parse(recorder.to_json(DumpReason::Request));
    CHECK(seqs_of(dump) == std::vector<std::uint32_t>{0, 1, 2});
    CHECK(dump.at("ops")[0].at("state") == "started");
    CHECK(dump.at("ops")[1].at("state") == "queued");
    CHECK(dump.at("ops")[2].at("state") == "queued");
    CHECK(dump.at("recorded") == 3);
  }
  SECTION("sequence numbers wrapping past 2^32 stay in call order") {
    FlightRecorder recorder({"", 0, 0, 2}, 4, "");
    for (std::uint32_t seq : {0xfffffffeu, 0xffffffffu, 0u, 1u})
      recorder.started(seq, Collective::Barrier, Algorithm::Auto, OpShape{}, 1000ms, t0);
    const json dump = json::parse(recorder.to_json(DumpReason::Request));
    CHECK(seqs_of(dump) == std::vector<std::uint32_t>{0xfffffffeu, 0xffffffffu, 0u, 1u});
  }
  SECTION("capacity 0 records nothing") {
    FlightRecorder recorder({"", 0, 0, 2}, 0, "");
    recorder.started(0, Collective::Barrier, Algorithm::Auto, OpShape{}, 1000ms, t0);
    recorder.done(0, Algorithm::Dissemination, t0);
    const json dump = json::parse(recorder.to_json(DumpReason::Request));
    CHECK(dump.at("ops") == json::array());
    CHECK(dump.at("capacity") == 0);
    CHECK(dump.at("recorded") == 0);
  }
}

TEST_CASE("file names and explicit paths", "[comm][trace]") {
  const TempDir dir("cohort-trace-test");
  SECTION("the job id names the file, made safe for a path") {
    const FlightRecorder recorder({"slurm/12:3", 3, 1, 2}, 1, dir.path().string());
    CHECK(recorder.default_path() ==
          (dir.path() / "cohort-trace.slurm_12_3.comm3.rank1.json").string());
  }
  SECTION("without a job id, the pid does") {
    const FlightRecorder recorder({"", 0, 5, 8}, 1, dir.path().string());
    CHECK(recorder.default_path() ==
          (dir.path() / ("cohort-trace." + std::to_string(::getpid()) + ".comm0.rank5.json"))
              .string());
  }
  SECTION("without a trace directory, requests go to the temp dir") {
    const FlightRecorder recorder({"j", 2, 0, 1}, 1, "");
    CHECK(recorder.default_path() ==
          (std::filesystem::temp_directory_path() / "cohort-trace.j.comm2.rank0.json").string());
  }
  SECTION("a missing trace directory is created; an explicit path is used as given") {
    const std::string nested = (dir.path() / "a" / "b").string();
    const FlightRecorder recorder({"j", 0, 0, 1}, 1, nested);
    const std::string written = recorder.dump({}, DumpReason::Request);
    CHECK(written == nested + "/cohort-trace.j.comm0.rank0.json");
    CHECK(read_json(written).at("reason") == "request");
    const std::string chosen = (dir.path() / "mine.json").string();
    CHECK(recorder.dump(chosen, DumpReason::Request) == chosen);
    CHECK(read_json(chosen).at("rank") == 0);
    // Nothing half-written is left beside them.
    std::size_t files = 0;
    for (const auto& entry : std::filesystem::recursive_directory_iterator(dir.path()))
      files += entry.is_regular_file() ? 1 : 0;
    CHECK(files == 2);
  }
  SECTION("an unwritable path throws SystemError") {
    const FlightRecorder recorder({"j", 0, 0, 1}, 1, "");
    try {
      recorder.dump((dir.path() / "no-such-dir" / "x.json").string(), DumpReason::Request);
      FAIL("no error");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::SystemError);
      CHECK_THAT(e.message(), Catch::Contains("no-such-dir"));
    }
  }
}

TEST_CASE("the first failure is kept and dumped once, only with a trace directory",
          "[comm][trace]") {
  const TempDir dir("cohort-trace-test");
  FlightRecorder recorder({"j", 0, 2, 4}, 4, dir.path().string());
  recorder.started(4, Collective::Allreduce, Algorithm::Auto,
                   shape(DType::Float32, ReduceOp::Sum, -1, 1), 1000ms, Clock::now());
  const Error first(ErrorCode::Timeout, "rank 1 sent nothing",
                    ErrorContext{.op = "allreduce", .sequence = 4, .peers = {1}});
  recorder.failed(4, first, Clock::now());
  recorder.record_failure(first);
  const std::string path = recorder.default_path();
  REQUIRE(std::filesystem::exists(path));
  const json dump = read_json(path);
  CHECK(dump.at("reason") == "failure");
  CHECK(dump.at("failure").at("code") == "timeout");
  CHECK(dump.at("failure").at("op") == "allreduce");
  CHECK(dump.at("failure").at("sequence") == 4);
  CHECK(dump.at("failure").at("peers") == json({1}));
  CHECK_THAT(dump.at("failure").at("message").get<std::string>(),
             Catch::Contains("rank 1 sent nothing"));
  CHECK(dump.at("ops")[0].at("state") == "failed");

  // A later failure (a consequence) neither replaces the first nor writes again.
  std::filesystem::remove(path);
  recorder.record_failure(Error(ErrorCode::InvalidUsage, "later"));
  CHECK_FALSE(std::filesystem::exists(path));
  CHECK(json::parse(recorder.to_json(DumpReason::Request)).at("failure").at("code") == "timeout");

  // Without a directory nothing is written on failure.
  FlightRecorder silent({"cohort-trace-test-unwritten", 9, 0, 1}, 4, "");
  silent.record_failure(first);
  CHECK_FALSE(std::filesystem::exists(silent.default_path()));
}

TEST_CASE("SIGUSR1 dumps every recorder that has a trace directory", "[comm][trace]") {
  const TempDir dir("cohort-trace-test");
  const TempDir other("cohort-trace-test");
  FlightRecorder a({"sig", 0, 0, 2}, 4, dir.path().string());
  FlightRecorder b({"sig", 1, 0, 2}, 4, dir.path().string());
  FlightRecorder quiet({"sig", 2, 0, 2}, 4, "");  // no directory: never dumped by a signal
  a.started(0, Collective::Barrier, Algorithm::Auto, OpShape{}, 1000ms, Clock::now());
  REQUIRE(::kill(::getpid(), SIGUSR1) == 0);
  REQUIRE(cohort::test::wait_for_file(a.default_path(), 10s));
  REQUIRE(cohort::test::wait_for_file(b.default_path(), 10s));
  const json dump = read_json(a.default_path());
  CHECK(dump.at("reason") == "signal");
  CHECK(dump.at("ops")[0].at("state") == "started");
  CHECK(read_json(b.default_path()).at("communicator") == 1);

  // A forked child has no reading thread and not its parent's recorders: its first recorder
  // starts a thread of its own, and a signal dumps only the child's.
  cohort::test::ForkedChild child([&] {
    FlightRecorder mine({"sig", 7, 0, 1}, 4, other.path().string());
    if (::kill(::getpid(), SIGUSR1) != 0) return 2;
    if (!cohort::test::wait_for_file(mine.default_path(), 10s)) return 3;
    for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
      std::ifstream in(entry.path());
      if (json::parse(in).at("pid") == ::getpid()) return 4;  // rewrote a parent's record
    }
    return 0;
  });
  CHECK(child.join(30s) == 0);
}

TEST_CASE("dumps taken while ops are recorded show whole entries in order", "[comm][trace]") {
  // A small ring is copied between two of the driver's ops; the default one (2000) is not, and
  // its copy keeps only what it can tell is whole.
  const std::size_t capacity = GENERATE(64u, 2000u);
  CAPTURE(capacity);
  FlightRecorder recorder({"", 0, 0, 2}, capacity, "");
  std::atomic<bool> stop{false};
  std::atomic<int> bad{0};
  std::atomic<int> dumps{0};
  std::thread dumper([&] {
    while (!stop.load()) {
      const json dump = json::parse(recorder.to_json(DumpReason::Request));
      bad.fetch_add(gaps_in(dump));
      for (const json& op : dump.at("ops")) {
        // Every op of this loop is an allreduce whose count equals its sequence number.
        if (op.at("op") != "allreduce" || op.at("count") != op.at("seq")) bad.fetch_add(1);
        if (op.at("state") == "done" && op.at("algorithm") != "ring") bad.fetch_add(1);
      }
      dumps.fetch_add(1);
    }
  });
  const Clock::time_point t0 = Clock::now();
  std::uint32_t seq = 0;
  for (; seq < 20000 || dumps.load() < 3; ++seq) {
    recorder.started(seq, Collective::Allreduce, Algorithm::Auto,
                     shape(DType::Float32, ReduceOp::Sum, -1, seq), 1000ms, t0);
    recorder.done(seq, Algorithm::Ring, t0);
  }
  stop.store(true);
  dumper.join();
  CHECK(bad.load() == 0);
  const json ops = json::parse(recorder.to_json(DumpReason::Request)).at("ops");
  CHECK(ops.size() == capacity);
  const json& last = ops.back();
  CHECK(last.at("seq") == seq - 1);
  CHECK(last.at("state") == "done");
}

TEST_CASE("queued records from other threads while the driver runs stay whole and in order",
          "[comm][trace]") {
  // Thread Q queues op n (the side ring, under the lock) before the driver starts it (its own
  // ring, no lock), as an executor's caller and its progress thread do; a third thread dumps.
  FlightRecorder recorder({"", 0, 0, 2}, 16, "");
  constexpr std::uint32_t kOps = 20000;
  std::atomic<std::uint32_t> queued_through{0};   // ops queued so far
  std::atomic<std::uint32_t> started_through{0};  // ops started so far
  std::atomic<bool> stop{false};
  std::atomic<int> bad{0};
  std::atomic<int> dumps{0};
  const Clock::time_point t0 = Clock::now();
  std::thread queuer([&] {
    for (std::uint32_t seq = 0; seq < kOps; ++seq) {
      // At most half the ring ahead of the driver: more would leave a gap the dump rightly
      // shows (queued ops beyond the capacity are dropped, oldest first).
      while (seq >= started_through.load(std::memory_order_acquire) + 8) std::this_thread::yield();
      recorder.queued(seq, Collective::Reduce, Algorithm::Auto,
                      shape(DType::Int64, ReduceOp::Max, 0, seq), 1000ms, t0);
      queued_through.store(seq + 1, std::memory_order_release);
    }
  });
  std::thread dumper([&] {
    while (!stop.load()) {
      const json dump = json::parse(recorder.to_json(DumpReason::Request));
      bad.fetch_add(gaps_in(dump));
      bool seen_queued = false;
      for (const json& op : dump.at("ops")) {
        if (op.at("op") != "reduce" || op.at("count") != op.at("seq")) bad.fetch_add(1);
        // Started ops come first, then the queued ones behind them.
        if (op.at("state") == "queued") seen_queued = true;
        if (seen_queued && op.at("state") != "queued") bad.fetch_add(1);
      }
      dumps.fetch_add(1);
    }
  });
  for (std::uint32_t seq = 0; seq < kOps; ++seq) {
    while (queued_through.load(std::memory_order_acquire) <= seq) std::this_thread::yield();
    recorder.started(seq, Collective::Reduce, Algorithm::Auto,
                     shape(DType::Int64, ReduceOp::Max, 0, seq), 1000ms, t0 + 1ms, t0);
    recorder.done(seq, Algorithm::Tree, t0 + 2ms);
    started_through.store(seq + 1, std::memory_order_release);
  }
  queuer.join();
  while (dumps.load() < 3) std::this_thread::yield();
  stop.store(true);
  dumper.join();
  CHECK(bad.load() == 0);
  const json dump = json::parse(recorder.to_json(DumpReason::Request));
  CHECK(dump.at("recorded") == kOps);  // each op counted once, when it was queued
  std::vector<std::uint32_t> newest;
  for (std::uint32_t seq = kOps - 16; seq < kOps; ++seq) newest.push_back(seq);
  CHECK(seqs_of(dump) == newest);
  for (const json& op : dump.at("ops")) CHECK(op.at("state") == "done");
}

TEST_CASE("the driver's records show at once; a late one for an overwritten op changes nothing",
          "[comm][trace]") {
  const Clock::time_point t0 = Clock::now();
  const auto start = [&](FlightRecorder& r, std::uint32_t seq) {
    r.started(seq, Collective::Broadcast, Algorithm::Auto, shape(DType::Int8, std::nullopt, 0, 4),
              1000ms, t0);
  };
  SECTION("done, with the algorithm that ran") {
    FlightRecorder recorder({"", 0, 0, 2}, 8, "");
    start(recorder, 0);
    recorder.done(0, Algorithm::Tree, t0 + 2ms);
    const json op = json::parse(recorder.to_json(DumpReason::Request)).at("ops").at(0);
    CHECK(op.at("state") == "done");
    CHECK(op.at("algorithm") == "tree");
    CHECK(op.at("finished_us").get<std::int64_t>() - op.at("started_us").get<std::int64_t>() ==
          2000);
  }
  SECTION("an end stamped before the start (a coarse clock) is taken as the start") {
    FlightRecorder recorder({"", 0, 0, 2}, 8, "");
    start(recorder, 0);
    recorder.done(0, Algorithm::Tree, t0 - 3ms);
    const json op = json::parse(recorder.to_json(DumpReason::Request)).at("ops").at(0);
    CHECK(op.at("finished_us") == op.at("started_us"));
  }
  SECTION("one slot: op 0's late end and failure leave op 1 as it is") {
    FlightRecorder recorder({"", 0, 0, 2}, 1, "");
    start(recorder, 0);
    start(recorder, 1);
    recorder.done(0, Algorithm::Tree, t0);
    recorder.failed(0, Error(ErrorCode::Timeout, "late", ErrorContext{.peers = {1}}), t0);
    const json ops = json::parse(recorder.to_json(DumpReason::Request)).at("ops");
    REQUIRE(ops.size() == 1);
    CHECK(ops[0].at("seq") == 1);
    CHECK(ops[0].at("state") == "started");
    CHECK(ops[0].at("algorithm").is_null());
    CHECK(ops[0].at("awaited_peers") == json::array());
  }
  SECTION("a failure after a done op keeps both outcomes") {
    FlightRecorder recorder({"", 0, 0, 2}, 8, "");
    start(recorder, 0);
    recorder.done(0, Algorithm::Tree, t0);
    start(recorder, 1);
    recorder.failed(1, Error(ErrorCode::Timeout, "late", ErrorContext{.peers = {1}}), t0);
    const json ops = json::parse(recorder.to_json(DumpReason::Request)).at("ops");
    REQUIRE(ops.size() == 2);
    CHECK(ops[0].at("state") == "done");
    CHECK(ops[1].at("state") == "failed");
    CHECK(ops[1].at("awaited_peers") == json::array({1}));
  }
}

TEST_CASE("ops run outside the executor (device ops) show between the driver's, by number",
          "[comm][trace]") {
  FlightRecorder recorder({"", 0, 0, 4}, 8, "");
  const Clock::time_point t0 = Clock::now();
  recorder.started(0, Collective::Allreduce, Algorithm::Auto,
                   shape(DType::Float32, ReduceOp::Sum, -1, 2), 1000ms, t0);
  recorder.done(0, Algorithm::SharedMemory, t0);
  recorder.external_started(1, Collective::Allgather, Algorithm::Auto,
                            shape(DType::BFloat16, std::nullopt, -1, 3), 1000ms, t0);
  recorder.external_done(1, t0 + 4ms);
  recorder.started(2, Collective::Barrier, Algorithm::Auto, OpShape{}, 1000ms, t0);
  recorder.done(2, Algorithm::Dissemination, t0);
  recorder.external_started(3, Collective::Broadcast, Algorithm::Auto,
                            shape(DType::Float16, std::nullopt, 2, 9), 1000ms, t0);
  recorder.external_failed(3, Error(ErrorCode::RemoteError, "gone", ErrorContext{.peers = {2, 3}}),
                           t0 + 5ms);
  recorder.external_started(4, Collective::Barrier, Algorithm::Auto, OpShape{}, 1000ms, t0);

  const json dump = json::parse(recorder.to_json(DumpReason::Request));
  CHECK(seqs_of(dump) == std::vector<std::uint32_t>{0, 1, 2, 3, 4});
  CHECK(dump.at("recorded") == 5);
  const json& ops = dump.at("ops");
  CHECK(ops[0].at("state") == "done");
  CHECK(ops[1].at("op") == "allgather");
  CHECK(ops[1].at("dtype") == "bfloat16");
  CHECK(ops[1].at("state") == "done");
  CHECK(ops[1].at("finished_us").get<std::int64_t>() -
            ops[1].at("started_us").get<std::int64_t>() ==
        4000);
  CHECK(ops[2].at("op") == "barrier");
  CHECK(ops[3].at("state") == "failed");
  CHECK(ops[3].at("root") == 2);
  CHECK(ops[3].at("awaited_peers") == json({2, 3}));
  CHECK(ops[4].at("state") == "started");
}

TEST_CASE("a world of one records its collectives; dump_trace writes them", "[comm][trace]") {
  clear_launcher_variables();
  const TempDir dir("cohort-trace-test");
  const ScopedEnv trace_dir("COHORT_TRACE_DIR", dir.path().string());
  const ScopedEnv job("COHORT_JOB_ID", "world1");
  auto c = init();
  std::vector<float> data(100, 1.0f);
  const Buffer b = Buffer::view(data.data(), 100, DType::Float32);
  c->allreduce(b, ReduceOp::Max);
  c->broadcast(b, 0);
  c->barrier();
  c->allreduce_async(b, b, ReduceOp::Sum).wait();

  const std::string path = c->dump_trace();
  CHECK(path == (dir.path() / "cohort-trace.world1.comm0.rank0.json").string());
  const json dump = read_json(path);
  CHECK(dump.at("reason") == "request");
  CHECK(dump.at("size") == 1);
  CHECK(seqs_of(dump) == std::vector<std::uint32_t>{0, 1, 2, 3});
  const char* names[] = {"allreduce", "broadcast", "barrier", "allreduce"};
  for (std::size_t i = 0; i < 4; ++i) {
    const json& op = dump.at("ops")[i];
    CAPTURE(i);
    CHECK(op.at("op") == names[i]);
    CHECK(op.at("state") == "done");
    CHECK_FALSE(op.at("finished_us").is_null());
  }
  CHECK(dump.at("ops")[0].at("reduce_op") == "max");
  CHECK(dump.at("ops")[0].at("count") == 100);
  CHECK(dump.at("ops")[1].at("root") == 0);
  CHECK(dump.at("ops")[3].at("reduce_op") == "sum");

  // An explicit path wins over the directory.
  const std::string chosen = (dir.path() / "explicit.json").string();
  CHECK(c->dump_trace(chosen) == chosen);
  CHECK(read_json(chosen).at("ops").size() == 4);
}
