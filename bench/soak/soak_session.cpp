#include "soak_session.hpp"

#include "soak_summary.hpp"

#include <cohort/error.hpp>

#include <exception>
#include <vector>

namespace cohort::soak {
namespace {

constexpr const char* kLeftKeyPrefix = "cohort-soak/left/";

// How long a survivor waits for the others to finish: each may spend up to one op timeout
// waiting on a survivor that already gave up, then its follow-up op, with room for a loaded box.
std::chrono::milliseconds leave_deadline(const SoakOptions& options) {
  return 3 * options.timeout + std::chrono::seconds(60);
}

// One write per line, so the lines of ranks sharing a terminal or log do not interleave.
void write_line(std::ostream& log, std::string line) {
  if (line.empty() || line.back() != '\n') line += '\n';
  log << line << std::flush;
}

}  // namespace

std::string judge(const RankOutcome& outcome, const SoakOptions& options, int rank) {
  const bool survivor = options.kill && options.kill->victim != rank;
  if (!survivor) {
    if (outcome.failure) return "an error although no rank was killed: " + outcome.failure->what;
    return {};
  }
  if (!outcome.failure) {
    return "no error although rank " + std::to_string(options.kill->victim) +
           " was killed at op #" + std::to_string(options.kill->at_op);
  }
  const FailureSeen& f = *outcome.failure;
  if (f.code != ErrorCode::RemoteError && f.code != ErrorCode::Timeout)
    return std::string("the first error is ") + std::string(error_code_name(f.code)) +
           ", not remote_error or timeout: " + f.what;
  if (f.op_index < options.kill->at_op)
    return "failed at op #" + std::to_string(f.op_index) + ", before the kill at op #" +
           std::to_string(options.kill->at_op) + ": " + f.what;
  if (f.followup_code != ErrorCode::InvalidUsage)
    return "the failed communicator's next op ended with " +
           std::string(f.followup_code ? error_code_name(*f.followup_code) : "success") +
           ", not invalid_usage (poisoned)";
  if (f.followup_time > kFollowupBound)
    return "the failed communicator took " + std::to_string(f.followup_time.count()) +
           " ms to refuse the next op";
  return {};
}

int run_session(const std::shared_ptr<Communicator>& world, Store& store,
                const SessionOptions& options, std::ostream& log) {
  const int rank = world->rank();
  const bool lead = rank == 0;
  std::uint64_t next_progress = options.progress_every;
  auto progress = [&](const RankOutcome& so_far) {
    if (!lead || options.progress_every == 0 || so_far.ops_planned < next_progress) return;
    next_progress = (so_far.ops_planned / options.progress_every + 1) * options.progress_every;
    write_line(log, "cohort-soak: " + std::to_string(so_far.ops_planned) + "/" +
                        std::to_string(options.soak.ops) + " ops drawn, " +
                        std::to_string(so_far.ops_executed) + " run by rank 0, " +
                        std::to_string(static_cast<int>(so_far.seconds)) + " s");
  };

  std::string report;
  bool passed = false;
  try {
    const RankOutcome outcome = run_soak(world, options.soak, progress);
    const std::string problem = judge(outcome, options.soak, rank);
    passed = problem.empty();
    report = format_report(rank, outcome, passed ? "passed" : "FAILED (" + problem + ")");
    if (lead && options.print_mix)
      write_line(log, "cohort-soak: op mix on rank 0\n" + format_mix(outcome.mix));
  } catch (const std::exception& e) {
    report = "rank " + std::to_string(rank) + " FAILED: " + e.what();
  }
  write_line(log, "cohort-soak: " + report);

  try {
    store.set_string(kReportKeyPrefix + std::to_string(rank), report);
    if (options.soak.kill) {
      store.set_string(kLeftKeyPrefix + std::to_string(rank), "1");
      std::vector<std::string> survivors;
      for (int r = 0; r < world->size(); ++r)
        if (r != options.soak.kill->victim) survivors.push_back(kLeftKeyPrefix + std::to_string(r));
      store.wait(survivors, leave_deadline(options.soak));
    }
  } catch (const Error& e) {
    write_line(log, "cohort-soak: rank " + std::to_string(rank) +
                        ": publishing the report or leaving together failed: " + e.what());
    passed = false;
  }
  return passed ? 0 : 1;
}

}  // namespace cohort::soak
