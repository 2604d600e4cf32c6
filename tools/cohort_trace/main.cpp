// cohort-trace: merges the ranks' flight records (Communicator::dump_trace(), or the dumps a
// failure or SIGUSR1 writes to COHORT_TRACE_DIR) and says, per communicator, which rank is behind
// or diverged, at which sequence number and op. Exit code: 0 when every communicator's records
// agree, 1 when the verdict found a problem, 2 when there was nothing to read or bad usage.

#include "cohort_trace/flight_dump.hpp"
#include "cohort_trace/trace_verdict.hpp"
#include "core/tunables.hpp"

#include <cohort/error.hpp>

#include <CLI/CLI.hpp>

#include <cstdio>
#include <set>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  CLI::App app{
      "cohort-trace: merge the ranks' flight records and say which rank is behind or diverged"};
  std::vector<std::string> inputs;
  std::size_t max_details = 8;
  app.add_option("paths", inputs,
                 "dump files or directories holding cohort-trace.*.json (default: "
                 "$COHORT_TRACE_DIR, else the current directory)");
  app.add_option("-d,--details", max_details, "evidence lines shown per communicator")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  if (inputs.empty()) {
    try {
      inputs.push_back(cohort::tunables().trace_dir.value_or("."));
    } catch (const cohort::Error& e) {
      std::fprintf(stderr, "cohort-trace: %s\n", e.what());
      return 2;
    }
  }
  std::vector<std::filesystem::path> paths(inputs.begin(), inputs.end());
  std::vector<std::string> problems;
  const std::vector<cohort::trace::RankDump> dumps = cohort::trace::read_dumps(paths, problems);
  for (const std::string& problem : problems)
    std::fprintf(stderr, "cohort-trace: skipped %s\n", problem.c_str());
  if (dumps.empty()) {
    std::string where;
    for (const std::string& input : inputs) where += (where.empty() ? "" : ", ") + input;
    std::fprintf(stderr, "cohort-trace: no flight records in %s\n", where.c_str());
    return 2;
  }

  std::set<std::pair<std::string, std::uint32_t>> communicators;
  for (const cohort::trace::RankDump& d : dumps) communicators.insert({d.job, d.communicator});
  std::printf("cohort-trace: %zu flight records, %zu communicator%s\n", dumps.size(),
              communicators.size(), communicators.size() == 1 ? "" : "s");
  const std::vector<cohort::trace::Verdict> verdicts = cohort::trace::judge(dumps);
  std::fputs(cohort::trace::format_verdicts(verdicts, max_details).c_str(), stdout);
  for (const cohort::trace::Verdict& v : verdicts)
    if (v.kind != cohort::trace::VerdictKind::Consistent) return 1;
  return 0;
}
