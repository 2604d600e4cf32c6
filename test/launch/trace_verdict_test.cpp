// cohort-trace's reading and verdict on hand-written flight records: every kind of verdict with
// the exact sentence it prints, the window of sequence numbers all rings still hold, ranks
// without a record, grouping by communicator, and malformed files.

#include "cohort_trace/trace_verdict.hpp"
#include "cohort_trace/flight_dump.hpp"

#include <cohort/error.hpp>

#include "support/temp_dir.hpp"

#include <catch2/catch.hpp>

#include <fstream>
#include <optional>
#include <string>
#include <vector>

namespace {

using namespace cohort::trace;

// Wall-clock microseconds of the records: an arbitrary instant, then seconds after it.
constexpr std::int64_t kT0 = 1'700'000'000'000'000;
constexpr std::int64_t kSecond = 1'000'000;

std::string number_or_null(std::optional<std::int64_t> v) {
  return v ? std::to_string(*v) : "null";
}

// One op as the recorder writes it; `shape` is the dtype/reduce_op/count/root part.
std::string op(
    std::uint32_t seq, const std::string& name, const std::string& state,
    std::optional<std::int64_t> started, std::optional<std::int64_t> finished,
    const std::string& shape = R"("dtype": "float", "reduce_op": "sum", "count": 4, "root": null)",
    const std::string& peers = "[]") {
  return R"({"seq": )" + std::to_string(seq) + R"(, "op": ")" + name + R"(", )" + shape +
         R"(, "algorithm": null, "state": ")" + state +
         R"(", "timeout_ms": 600000, "queued_us": )" + number_or_null(started) +
         R"(, "started_us": )" + number_or_null(started) + R"(, "finished_us": )" +
         number_or_null(finished) + R"(, "awaited_peers": )" + peers + "}";
}

// A dump of communicator `comm` by `rank` of `size`, taken at `dumped_at`.
std::string dump(int rank, int size, const std::vector<std::string>& ops,
                 std::int64_t dumped_at = kT0 + 1000 * kSecond, const std::string& failure = "null",
                 std::uint32_t comm = 0, std::uint64_t capacity = 2000) {
  std::string text = R"({"format": "cohort-flight-record", "version": 1, "job": "1234", )"
                     R"("pid": )" +
                     std::to_string(4000 + rank) + R"(, "host": "node0", "communicator": )" +
                     std::to_string(comm) + R"(, "rank": )" + std::to_string(rank) +
                     R"(, "size": )" + std::to_string(size) +
                     R"(, "reason": "failure", "dumped_at_us": )" + std::to_string(dumped_at) +
                     R"(, "capacity": )" + std::to_string(capacity) + R"(, "recorded": )" +
                     std::to_string(ops.size()) + R"(, "failure": )" + failure + R"(, "ops": [)";
  for (std::size_t i = 0; i < ops.size(); ++i) text += (i ? ", " : "") + ops[i];
  return text + "]}";
}

std::vector<RankDump> parse_all(const std::vector<std::string>& texts) {
  std::vector<RankDump> dumps;
  for (std::size_t i = 0; i < texts.size(); ++i)
    dumps.push_back(parse_dump(texts[i], "dump" + std::to_string(i)));
  return dumps;
}

Verdict only_verdict(const std::vector<std::string>& texts) {
  const std::vector<Verdict> verdicts = judge(parse_all(texts));
  REQUIRE(verdicts.size() == 1);
  return verdicts.front();
}

std::string timeout_failure(std::uint32_t seq, const std::string& peers = "[]") {
  return R"({"code": "timeout", "message": "allreduce #)" + std::to_string(seq) +
         R"(: timed out", "op": "allreduce", "sequence": )" + std::to_string(seq) +
         R"(, "peers": )" + peers + "}";
}

}  // namespace

TEST_CASE("rank lists name runs of three or more as ranges", "[trace]") {
  CHECK(rank_list({2}) == "rank 2");
  CHECK(rank_list({0, 1, 3}) == "ranks 0,1,3");
  CHECK(rank_list({7, 0, 1, 2, 3, 4, 5}) == "ranks 0-5,7");
  CHECK(rank_list({3, 1, 2, 2}) == "ranks 1-3");
}

TEST_CASE("records that agree give a consistent verdict", "[trace]") {
  std::vector<std::string> texts;
  for (int r = 0; r < 3; ++r) {
    texts.push_back(dump(r, 3,
                         {op(0, "allreduce", "done", kT0, kT0 + 10),
                          op(1, "barrier", "done", kT0 + 20, kT0 + 30,
                             R"("dtype": null, "reduce_op": null, "count": 0, "root": null)"),
                          op(2, "allreduce", "done", kT0 + 40, kT0 + 50)}));
  }
  const Verdict v = only_verdict(texts);
  CHECK(v.kind == VerdictKind::Consistent);
  CHECK(v.headline == "consistent: every rank finished every collective up to allreduce #2");
  CHECK(v.culprits.empty());
  CHECK(format_verdicts({v}) ==
        "communicator 0 (3 ranks): consistent (no disagreement in the records)\n");
}

TEST_CASE("a rank that never entered the op the others wait in is behind", "[trace]") {
  // Ranks 0, 1 and 3 entered allreduce #1042 and gave up after 600 s; rank 2's last op is #1041.
  const std::int64_t entered = kT0 + 5 * kSecond;
  std::vector<std::string> texts;
  for (int r : {0, 1, 3}) {
    texts.push_back(
        dump(r, 4,
             {op(1040, "allreduce", "done", kT0, kT0 + 100),
              op(1041, "allreduce", "done", kT0 + 200, kT0 + 300),
              op(1042, "allreduce", "failed", entered, entered + 600 * kSecond,
                 R"("dtype": "float", "reduce_op": "sum", "count": 4, "root": null)", "[2]")},
             entered + 601 * kSecond, timeout_failure(1042, "[2]")));
  }
  texts.push_back(dump(2, 4,
                       {op(1040, "allreduce", "done", kT0, kT0 + 100),
                        op(1041, "allreduce", "done", kT0 + 200, kT0 + 300)},
                       entered + 602 * kSecond));
  const Verdict v = only_verdict(texts);
  CHECK(v.kind == VerdictKind::Behind);
  CHECK(v.seq == 1042u);
  CHECK(v.op == "allreduce");
  CHECK(v.culprits == std::vector<int>{2});
  CHECK(v.missing.empty());
  CHECK(v.headline == "rank 2 never entered allreduce #1042; ranks 0,1,3 waited 600 s");
  REQUIRE(v.details.size() == 4);
  CHECK(v.details[0] == "rank 2: never entered it; its last was allreduce #1041, done in 0.0 s");
  CHECK(v.details[1] ==
        "rank 0: allreduce #1042, failed after 600 s (timeout), waiting for rank 2");
}

TEST_CASE("a rank inside the op that never finished while the others gave up froze", "[trace]") {
  const std::int64_t entered = kT0 + 10 * kSecond;
  std::vector<std::string> texts;
  for (int r : {0, 2}) {
    texts.push_back(dump(r, 3,
                         {op(4, "allreduce", "done", kT0, kT0 + 50),
                          op(5, "allreduce", "failed", entered, entered + 2 * kSecond)},
                         entered + 3 * kSecond, timeout_failure(5)));
  }
  // Rank 1 entered #5 at the same time and was still inside when it dumped 30 s later.
  texts.push_back(dump(1, 3,
                       {op(4, "allreduce", "done", kT0, kT0 + 50),
                        op(5, "allreduce", "started", entered, std::nullopt)},
                       entered + 30 * kSecond));
  const Verdict v = only_verdict(texts);
  CHECK(v.kind == VerdictKind::Stuck);
  CHECK(v.seq == 5u);
  CHECK(v.culprits == std::vector<int>{1});
  CHECK(v.headline ==
        "rank 1 froze in allreduce #5: entered, never finished (inside for 30 s); ranks 0,2 "
        "failed after 2.0 s (timeout)");
  CHECK(v.details.front() == "rank 1: allreduce #5, entered, not finished after 30 s");
}

TEST_CASE("ranks that are all inside the same op are stuck together", "[trace]") {
  const std::string barrier = R"("dtype": null, "reduce_op": null, "count": 0, "root": null)";
  const Verdict v = only_verdict(
      {dump(0, 2, {op(2, "barrier", "started", kT0, std::nullopt, barrier)}, kT0 + 5 * kSecond),
       dump(1, 2, {op(2, "barrier", "started", kT0 + kSecond, std::nullopt, barrier)},
            kT0 + 5 * kSecond)});
  CHECK(v.kind == VerdictKind::Stuck);
  CHECK(v.culprits.empty());
  CHECK(v.headline ==
        "every rank (ranks 0,1) is inside barrier #2 and none finished (for up to 5.0 s)");
}

TEST_CASE("different calls at one sequence number diverged", "[trace]") {
  SECTION("another collective") {
    const std::string allreduce =
        R"("dtype": "float", "reduce_op": "sum", "count": 4, "root": null)";
    const std::string broadcast = R"("dtype": "float", "reduce_op": null, "count": 4, "root": 0)";
    const Verdict v = only_verdict({
        dump(0, 3,
             {op(6, "barrier", "done", kT0, kT0 + 1),
              op(7, "allreduce", "failed", kT0, kT0 + 2 * kSecond, allreduce)}),
        dump(1, 3,
             {op(6, "barrier", "done", kT0, kT0 + 1),
              op(7, "broadcast", "done", kT0, kT0 + 5, broadcast)}),
        dump(2, 3,
             {op(6, "barrier", "done", kT0, kT0 + 1),
              op(7, "allreduce", "failed", kT0, kT0 + 2 * kSecond, allreduce)}),
    });
    CHECK(v.kind == VerdictKind::Diverged);
    CHECK(v.seq == 7u);
    CHECK(v.op == "allreduce");
    CHECK(v.culprits == std::vector<int>{1});
    CHECK(v.headline ==
          "diverged at #7: rank 1 called broadcast #7 (float x 4, root 0); ranks 0,2 called "
          "allreduce #7 (float x 4, sum)");
  }
  SECTION("the same collective with another dtype") {
    const Verdict v = only_verdict({
        dump(0, 3,
             {op(3, "allreduce", "done", kT0, kT0 + 1,
                 R"("dtype": "float", "reduce_op": "sum", "count": 8, "root": null)")}),
        dump(1, 3,
             {op(3, "allreduce", "done", kT0, kT0 + 1,
                 R"("dtype": "float", "reduce_op": "sum", "count": 8, "root": null)")}),
        dump(2, 3,
             {op(3, "allreduce", "done", kT0, kT0 + 1,
                 R"("dtype": "int32", "reduce_op": "sum", "count": 8, "root": null)")}),
    });
    CHECK(v.kind == VerdictKind::Diverged);
    CHECK(v.culprits == std::vector<int>{2});
    CHECK(v.headline ==
          "diverged at #3: rank 2 called allreduce #3 (int32 x 8, sum); ranks 0,1 called "
          "allreduce #3 (float x 8, sum)");
  }
  SECTION("alltoallv counts differ by rank and do not count") {
    const Verdict v = only_verdict({
        dump(0, 2,
             {op(0, "alltoallv", "done", kT0, kT0 + 1,
                 R"("dtype": "int32", "reduce_op": null, "count": 5, "root": null)")}),
        dump(1, 2,
             {op(0, "alltoallv", "done", kT0, kT0 + 1,
                 R"("dtype": "int32", "reduce_op": null, "count": 9, "root": null)")}),
    });
    CHECK(v.kind == VerdictKind::Consistent);
  }
}

TEST_CASE("only sequence numbers every ring still holds are compared", "[trace]") {
  // Rank 1's ring (capacity 4) dropped #0-#5; rank 0's holds everything.
  std::vector<std::string> all, recent;
  for (std::uint32_t s = 0; s < 10; ++s) all.push_back(op(s, "allreduce", "done", kT0, kT0 + 1));
  for (std::uint32_t s = 6; s < 10; ++s) recent.push_back(op(s, "allreduce", "done", kT0, kT0 + 1));
  SECTION("agreeing from #6 on: consistent") {
    CHECK(only_verdict({dump(0, 2, all), dump(1, 2, recent, kT0, "null", 0, 4)}).kind ==
          VerdictKind::Consistent);
  }
  SECTION("rank 1 stopped at #8: behind at #9, not at #0") {
    recent.pop_back();
    const Verdict v = only_verdict({dump(0, 2, all), dump(1, 2, recent, kT0, "null", 0, 4)});
    CHECK(v.kind == VerdictKind::Behind);
    CHECK(v.seq == 9u);
    CHECK(v.headline == "rank 1 never entered allreduce #9; rank 0 finished it");
  }
}

TEST_CASE(
    "a rank's record is whole only over its last capacity numbers, not from its oldest "
    "entry",
    "[trace]") {
  // Capacity 4. Both ranks still hold an old barrier #0 in the host ring; their device ring
  // holds #10-#13 on rank 0 and #11-#14 on rank 1, which queued one device op more and so
  // dropped #10. The disagreement is at #14; #10 is only out of rank 1's window.
  const auto device_ops = [](std::uint32_t from, std::uint32_t to) {
    std::vector<std::string> ops{op(0, "barrier", "done", kT0, kT0 + 1,
                                    R"("dtype": null,)"
                                    R"( "reduce_op": null,)"
                                    R"( "count": 0, "root": null)")};
    for (std::uint32_t s = from; s <= to; ++s)
      ops.push_back(op(s, "allreduce", "done", kT0, kT0 + 1));
    return ops;
  };
  const Verdict v = only_verdict({dump(0, 2, device_ops(10, 13), kT0, "null", 0, 4),
                                  dump(1, 2, device_ops(11, 14), kT0, "null", 0, 4)});
  CHECK(v.kind == VerdictKind::Behind);
  CHECK(v.seq == 14u);
  CHECK(v.headline == "rank 0 never entered allreduce #14; rank 1 finished it");
}

TEST_CASE("sequence numbers that wrapped past 2^32 keep their order", "[trace]") {
  // #4294967294, #4294967295, #0, #1 on rank 0; rank 1 stopped after #0.
  std::vector<std::string> ahead, stopped;
  for (const std::uint32_t s : {4294967294u, 4294967295u, 0u, 1u})
    ahead.push_back(op(s, "allreduce", "done", kT0, kT0 + 1));
  stopped = ahead;
  stopped.pop_back();
  const Verdict v = only_verdict({dump(0, 2, ahead), dump(1, 2, stopped)});
  CHECK(v.kind == VerdictKind::Behind);
  CHECK(v.seq == 1u);
  CHECK(v.headline == "rank 1 never entered allreduce #1; rank 0 finished it");
  CHECK(only_verdict({dump(0, 2, ahead), dump(1, 2, ahead)}).seq == 1u);
}

TEST_CASE("a rank without a record is named, never assumed", "[trace]") {
  // Rank 2 died (no dump); ranks 0 and 1 failed allreduce #4 waiting for it.
  const std::string dead = R"({"code": "remote_error", "message": "allreduce #4: rank 2 died", )"
                           R"("op": "allreduce", "sequence": 4, "peers": [2]})";
  const std::string shape = R"("dtype": "float", "reduce_op": "sum", "count": 4, "root": null)";
  const Verdict v = only_verdict({
      dump(0, 3, {op(4, "allreduce", "failed", kT0, kT0 + kSecond, shape, "[2]")},
           kT0 + 2 * kSecond, dead),
      dump(1, 3, {op(4, "allreduce", "failed", kT0, kT0 + kSecond, shape, "[2]")},
           kT0 + 2 * kSecond, dead),
  });
  CHECK(v.kind == VerdictKind::Failed);
  CHECK(v.missing == std::vector<int>{2});
  CHECK(v.culprits == std::vector<int>{2});
  CHECK(v.headline ==
        "allreduce #4 failed on ranks 0,1 (remote_error), waiting for rank 2 (no flight record "
        "from rank 2)");
  CHECK(v.details.back() == "rank 2: no flight record");
  CHECK(v.details.front() ==
        "rank 0: allreduce #4, failed after 1.0 s (remote_error), waiting for rank 2: allreduce "
        "#4: rank 2 died");

  SECTION("a rank that records nothing (COHORT_TRACE_BUFFER=0) counts as without a record") {
    const Verdict quiet = only_verdict(
        {dump(0, 2, {op(0, "barrier", "done", kT0, kT0 + 1)}), dump(1, 2, {}, kT0, "null", 0, 0)});
    CHECK(quiet.missing == std::vector<int>{1});
    CHECK(quiet.kind == VerdictKind::Consistent);
  }
}

TEST_CASE("a failure outside every collective is still reported", "[trace]") {
  // Sends are numbered apart from collectives: send #0 is not allreduce #0.
  const std::string send_failed =
      R"j({"code": "timeout", "message": "send #0 to rank 1 (tag 0): timed out", )j"
      R"j("op": "send", "name": "send #0 to rank 1 (tag 0)", "sequence": 0, "peers": [1], )j"
      R"j("to_rank": 1, "from_rank": null, "tag": 0})j";
  const Verdict v =
      only_verdict({dump(0, 2, {op(0, "allreduce", "done", kT0, kT0 + 1)}, kT0, send_failed),
                    dump(1, 2, {op(0, "allreduce", "done", kT0, kT0 + 1)})});
  CHECK(v.kind == VerdictKind::Failed);
  CHECK(v.headline == "collectives agree; rank 0 failed in send #0 to rank 1 (tag 0) (timeout)");
  CHECK(v.details == std::vector<std::string>{"rank 0: send #0 to rank 1 (tag 0): timed out"});

  SECTION("a record without a name (written before names were recorded) is named by its op") {
    const std::string unnamed =
        R"j({"code": "timeout", "message": "send #3: timed out", "op": "send", )j"
        R"j("sequence": 3, "peers": [1]})j";
    const Verdict old =
        only_verdict({dump(0, 2, {op(3, "allreduce", "done", kT0, kT0 + 1)}, kT0, unnamed),
                      dump(1, 2, {op(3, "allreduce", "done", kT0, kT0 + 1)})});
    CHECK(old.headline == "collectives agree; rank 0 failed in send (timeout)");
  }
}

TEST_CASE("dumps are grouped by communicator; a rank's latest dump counts", "[trace]") {
  const std::vector<std::string> texts = {
      // Communicator 0: both ranks finished allreduce #0.
      dump(0, 2, {op(0, "allreduce", "done", kT0, kT0 + 1)}, kT0 + kSecond, "null", 0),
      dump(1, 2, {op(0, "allreduce", "done", kT0, kT0 + 1)}, kT0 + kSecond, "null", 0),
      // Communicator 5: rank 1 dumped twice; the later dump shows it never entered #1.
      dump(0, 2,
           {op(0, "barrier", "done", kT0, kT0 + 1),
            op(1, "allreduce", "started", kT0 + 2, std::nullopt)},
           kT0 + 9 * kSecond, "null", 5),
      dump(1, 2,
           {op(0, "barrier", "done", kT0, kT0 + 1), op(1, "allreduce", "done", kT0 + 2, kT0 + 3)},
           kT0 + kSecond, "null", 5),
      dump(1, 2, {op(0, "barrier", "queued", kT0, std::nullopt)}, kT0 + 10 * kSecond, "null", 5),
  };
  const std::vector<Verdict> verdicts = judge(parse_all(texts));
  REQUIRE(verdicts.size() == 2);
  CHECK(verdicts[0].communicator == 5);
  CHECK(verdicts[0].kind == VerdictKind::Stuck);
  CHECK(verdicts[0].headline ==
        "rank 1 called barrier #0 but never started it (queued for 10 s); rank 0 finished it");
  CHECK(verdicts[1].communicator == 0);
  CHECK(verdicts[1].kind == VerdictKind::Consistent);
  const std::string text = format_verdicts(verdicts, 1);
  CHECK(text ==
        "communicator 5 (2 ranks): rank 1 called barrier #0 but never started it (queued for 10 "
        "s); rank 0 finished it\n"
        "    rank 1: barrier #0, called, never started (queued for 10 s)\n"
        "    ... 1 more lines\n"
        "communicator 0 (2 ranks): consistent (no disagreement in the records)\n");
}

TEST_CASE("malformed records are refused by name; read_dumps skips them", "[trace]") {
  const auto refused = [](const std::string& text, const std::string& needle) {
    try {
      parse_dump(text, "bad.json");
      FAIL("accepted: " << text);
    } catch (const cohort::Error& e) {
      CHECK(e.code() == cohort::ErrorCode::InvalidArgument);
      CHECK_THAT(e.message(), Catch::Contains("bad.json"));
      CHECK_THAT(e.message(), Catch::Contains(needle));
    }
  };
  refused("{not json", "invalid JSON");
  refused(R"({"format": "something-else", "version": 1})", "format");
  std::string v2 = dump(0, 1, {});
  v2.replace(v2.find("\"version\": 1"), 12, "\"version\": 2");
  refused(v2, "version 2");
  std::string no_rank = dump(0, 1, {});
  no_rank.replace(no_rank.find("\"rank\""), 6, "\"rnak\"");
  refused(no_rank, "field 'rank' is missing");
  refused(dump(0, 1, {op(0, "barrier", "sleeping", kT0, std::nullopt)}), "unknown op state");
  std::string bad_seq = dump(0, 1, {op(0, "barrier", "done", kT0, kT0)});
  bad_seq.replace(bad_seq.find("\"seq\": 0"), 8, "\"seq\": \"zero\"");
  refused(bad_seq, "field 'ops[0].seq' has the wrong type");
  refused(dump(3, 2, {}), "rank 3 of size 2");

  const cohort::test::TempDir dir("cohort-trace-verdict");
  std::ofstream(dir.path() / "cohort-trace.1234.comm0.rank0.json") << dump(0, 1, {});
  std::ofstream(dir.path() / "cohort-trace.1234.comm0.rank1.json") << "{truncated";
  std::ofstream(dir.path() / "notes.txt") << "not a record";
  std::vector<std::string> problems;
  const std::vector<RankDump> dumps = read_dumps({dir.path()}, problems);
  REQUIRE(dumps.size() == 1);
  CHECK(dumps[0].source == (dir.path() / "cohort-trace.1234.comm0.rank0.json").string());
  REQUIRE(problems.size() == 1);
  CHECK_THAT(problems[0], Catch::Contains("rank1.json"));
}
