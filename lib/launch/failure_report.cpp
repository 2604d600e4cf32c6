#include "launch/failure_report.hpp"

#include <cstdlib>
#include <sstream>

namespace cohort::launcher {
namespace {

std::string who(const RankFailure& f, int world_size) {
  return "rank " + std::to_string(f.rank) + " of " + std::to_string(world_size) + " (local rank " +
         std::to_string(f.local_rank) + ", node " + std::to_string(f.node_rank) + ", pid " +
         std::to_string(f.pid) + ")";
}

std::string how(const ExitStatus& status) {
  return (status.exited ? "failed with " : "was killed by ") + status.describe();
}

}  // namespace

std::string describe_failure(const RankFailure& failure, int world_size,
                             const std::vector<int>& stopped_ranks) {
  std::string text = who(failure, world_size) + " " + how(failure.status);
  text += stopped_ranks.empty() ? "; no other rank was running"
                                : "; stopped ranks " + join_ranks(stopped_ranks);
  if (failure.stderr_tail.empty()) {
    text += "; it wrote nothing to stderr";
  } else {
    text += "; last stderr lines of rank " + std::to_string(failure.rank) + ":";
    for (const std::string& line : failure.stderr_tail) text += "\n    " + line;
  }
  return text;
}

std::string failure_summary(const RankFailure& failure, int world_size, int this_node,
                            const std::vector<int>& stopped_ranks,
                            const std::vector<int>& killed_ranks,
                            const std::vector<std::string>& trace_lines) {
  std::ostringstream out;
  out << "cohort-run: ===== job failed =====\n";
  out << "cohort-run: first failure: " << who(failure, world_size) << " " << how(failure.status)
      << "\n";
  out << "cohort-run: stopped ranks on node " << this_node << ": "
      << (stopped_ranks.empty() ? "none (none were running)" : join_ranks(stopped_ranks));
  if (!killed_ranks.empty())
    out << " (SIGKILL after the grace period: " << join_ranks(killed_ranks) << ")";
  out << "\n";
  if (failure.stderr_tail.empty()) {
    out << "cohort-run: rank " << failure.rank << " wrote nothing to stderr\n";
  } else {
    out << "cohort-run: last stderr lines of rank " << failure.rank << ":\n";
    for (const std::string& line : failure.stderr_tail) out << "    " << line << "\n";
  }
  for (const std::string& line : trace_lines) out << "cohort-run: " << line << "\n";
  out << "cohort-run: exit code " << failure.status.shell_code() << "\n";
  return out.str();
}

std::string encode_failure(const RankFailure& f) {
  std::ostringstream out;
  out << "cohort-failure 1\n"
      << f.rank << ' ' << f.local_rank << ' ' << f.node_rank << ' ' << f.pid << ' '
      << (f.status.exited ? 1 : 0) << ' ' << f.status.code << ' ' << f.status.signal << ' '
      << (f.status.core_dumped ? 1 : 0) << '\n';
  for (const std::string& line : f.stderr_tail) out << line << '\n';
  return out.str();
}

std::optional<RankFailure> decode_failure(const std::string& text) {
  std::istringstream in(text);
  std::string header;
  if (!std::getline(in, header) || header != "cohort-failure 1") return std::nullopt;
  RankFailure f;
  int exited = 0, core = 0;
  std::string fields;
  if (!std::getline(in, fields)) return std::nullopt;
  std::istringstream numbers(fields);
  if (!(numbers >> f.rank >> f.local_rank >> f.node_rank >> f.pid >> exited >> f.status.code >>
        f.status.signal >> core)) {
    return std::nullopt;
  }
  f.status.exited = exited != 0;
  f.status.core_dumped = core != 0;
  for (std::string line; std::getline(in, line);) f.stderr_tail.push_back(line);
  return f;
}

}  // namespace cohort::launcher
