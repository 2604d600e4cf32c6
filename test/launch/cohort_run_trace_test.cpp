// cohort-run and the flight recorder, end to end: the ranks (trace_rank.cpp) get a trace
// directory, a failed job's summary ends with cohort-trace's verdict naming the rank and the op,
// ranks still running are asked for their records (SIGUSR1) before they are stopped, and a
// directory of cohort-run's own is removed when the job succeeds.

#include "command_runner.hpp"

#include "support/temp_dir.hpp"

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <regex>
#include <string>

namespace {

using cohort::test::CommandResult;
using cohort::test::run_command;
using cohort::test::TempDir;
using namespace std::chrono_literals;

std::string trace_rank_path() {
  const char* path = std::getenv("TRACE_RANK");
  if (!path || !*path) throw std::runtime_error("TRACE_RANK is not set (meson sets it)");
  return path;
}

CommandResult run_job(const std::string& mode, const std::map<std::string, std::string>& env = {}) {
  return run_command(
      {cohort::test::cohort_run_path(), "-n", "3", "--grace", "5", "--", trace_rank_path(), mode},
      env, 120s);
}

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// The directory the summary names ("flight records in <dir> (cohort-trace <dir> for more):").
std::string records_dir(const std::string& err) {
  std::smatch m;
  static const std::regex line(R"(cohort-run: flight records in (\S+) \(cohort-trace)");
  return std::regex_search(err, m, line) ? m[1].str() : std::string();
}

struct Subreaper {
  Subreaper() { cohort::test::become_subreaper(); }
} const subreaper;

// Shared memory off: the mismatched collectives then meet in UCX messages, whose sizes are
// checked, rather than in one segment's slots.
const std::map<std::string, std::string> kNoSharedMemory{{"COHORT_SHARED_MEMORY", "off"}};

}  // namespace

TEST_CASE("a successful job leaves no flight records behind", "[cohort-run][trace]") {
  const CommandResult r = run_job("ok");
  CAPTURE(r.out, r.err);
  REQUIRE(r.exit_code == 0);
  std::smatch m;
  REQUIRE(std::regex_search(r.out, m, std::regex(R"(trace dir: (\S+))")));
  CHECK(m[1].str().find("cohort-run-trace-") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(m[1].str()));
  CHECK_FALSE(contains(r.err, "flight records"));
}

TEST_CASE("a rank that skips a collective is named in the failure summary", "[cohort-run][trace]") {
  const CommandResult r = run_job("skip");
  CAPTURE(r.out, r.err);
  CHECK(r.exit_code == 1);
  // Rank 2 never called allreduce #3: it was asked for its record while blocked outside cohort.
  CHECK(contains(r.err,
                 "cohort-run:   communicator 0 (3 ranks): rank 2 never entered allreduce "
                 "#3; ranks 0,1 waited "));
  const std::string dir = records_dir(r.err);
  REQUIRE_FALSE(dir.empty());
  // One record per rank, kept for cohort-trace.
  std::size_t records = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    records += entry.path().extension() == ".json" ? 1 : 0;
  CHECK(records == 3);
  std::filesystem::remove_all(dir);
  CHECK(cohort::test::leftover_descendants(2s).empty());
}

TEST_CASE("mismatched collectives are named in the failure summary", "[cohort-run][trace]") {
  const CommandResult r = run_job("mismatch", kNoSharedMemory);
  CAPTURE(r.out, r.err);
  CHECK(r.exit_code == 1);
  CHECK(contains(r.err,
                 "communicator 0 (3 ranks): diverged at #3: rank 1 called broadcast #3 "
                 "(float x 4, root 0); ranks 0,2 called allreduce #3 (float x 4, sum)"));
  const std::string dir = records_dir(r.err);
  REQUIRE_FALSE(dir.empty());
  std::filesystem::remove_all(dir);
  CHECK(cohort::test::leftover_descendants(2s).empty());
}

TEST_CASE("a COHORT_TRACE_DIR of the user's is used, and its older records ignored",
          "[cohort-run][trace]") {
  const TempDir dir("cohort-run-trace-test");
  // An earlier job's record, written an hour ago: it would make rank 1 look diverged.
  const std::filesystem::path stale = dir.path() / "cohort-trace.999.comm0.rank1.json";
  std::ofstream(stale)
      << R"({"format": "cohort-flight-record", "version": 1, "job": "", "pid": 999, "host": "",)"
         R"( "communicator": 0, "rank": 1, "size": 3, "reason": "failure", "dumped_at_us": 0,)"
         R"( "capacity": 2000, "recorded": 1, "failure": null, "ops": [{"seq": 3, "op": "gather",)"
         R"( "dtype": "int8", "reduce_op": null, "count": 1, "root": 0, "algorithm": null,)"
         R"( "state": "done", "timeout_ms": 1, "queued_us": 0, "started_us": 0,)"
         R"( "finished_us": 0, "awaited_peers": []}]})";
  std::filesystem::last_write_time(
      stale, std::filesystem::file_time_type::clock::now() - std::chrono::hours(1));
  std::map<std::string, std::string> env{{"COHORT_TRACE_DIR", dir.path().string()}};
  const CommandResult r = run_job("skip", env);
  CAPTURE(r.out, r.err);
  CHECK(r.exit_code == 1);
  CHECK(records_dir(r.err) == dir.path().string());
  CHECK(contains(r.err, "rank 2 never entered allreduce #3; ranks 0,1 waited "));
  CHECK_FALSE(contains(r.err, "gather"));
  CHECK(std::filesystem::exists(stale));  // the user's directory is theirs: nothing removed
  CHECK(cohort::test::leftover_descendants(2s).empty());
}
