#include "cohort_run/flight_records.hpp"

#include <cohort/error.hpp>

#include "cohort_trace/flight_dump.hpp"
#include "cohort_trace/trace_verdict.hpp"
#include "core/log.hpp"
#include "core/pidfd.hpp"
#include "core/system_error.hpp"
#include "core/unique_fd.hpp"

#include <cerrno>
#include <csignal>
#include <cstdint>
#include <fstream>
#include <set>
#include <sstream>
#include <string_view>
#include <system_error>

#include <poll.h>
#include <sys/inotify.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace cohort::run {
namespace {

using Clock = std::chrono::steady_clock;

// File systems stamp writes with a coarse clock (a scheduler tick): a record written just after
// the job started may carry a time slightly before it. Earlier jobs' records are older by far more.
constexpr std::chrono::seconds kTimestampSlack{1};

// The rank in a record's file name, "cohort-trace.<job>.comm<id>.rank<r>.json"; -1 if none.
int rank_of_record(std::string_view name) {
  constexpr std::string_view kSuffix = ".json";
  if (name.rfind("cohort-trace.", 0) != 0 || name.size() < kSuffix.size() ||
      name.substr(name.size() - kSuffix.size()) != kSuffix)
    return -1;
  name.remove_suffix(kSuffix.size());
  const std::size_t at = name.rfind(".rank");
  if (at == std::string_view::npos) return -1;
  int rank = 0;
  const std::string_view digits = name.substr(at + 5);
  if (digits.empty()) return -1;
  for (char c : digits) {
    if (c < '0' || c > '9') return -1;
    rank = rank * 10 + (c - '0');
  }
  return rank;
}

}  // namespace

bool catches_signal(pid_t pid, int signal) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("SigCgt:", 0) != 0) continue;
    std::uint64_t mask = 0;
    std::istringstream(line.substr(7)) >> std::hex >> mask;
    return (mask >> (signal - 1)) & 1u;
  }
  return false;
}

JobFlightRecords::JobFlightRecords(const std::string& user_dir)
    : started_(std::filesystem::file_time_type::clock::now() - kTimestampSlack) {
  if (!user_dir.empty()) {
    dir_ = user_dir;
    // Made now rather than by the first rank that dumps, so it can be watched for records.
    std::error_code ec;
    std::filesystem::create_directories(dir_, ec);
    if (ec) COHORT_LOG_WARN("cannot create COHORT_TRACE_DIR {}: {}", dir_, ec.message());
    return;
  }
  std::string pattern =
      (std::filesystem::temp_directory_path() / "cohort-run-trace-XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr)
    throw system_error("cannot create a directory for flight records (" + pattern + ")", errno);
  dir_ = pattern;
  owned_ = true;
}

JobFlightRecords::~JobFlightRecords() {
  if (!owned_ || keep_) return;
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
  if (ec) COHORT_LOG_WARN("could not remove {}: {}", dir_, ec.message());
}

void JobFlightRecords::request_dumps(const std::vector<RankPid>& ranks,
                                     std::chrono::milliseconds limit) noexcept {
  try {
    // Watching starts before any signal, so no record written in reply is missed. A record
    // appears by rename (the writer never shows half a file).
    UniqueFd notify(::inotify_init1(IN_CLOEXEC | IN_NONBLOCK));
    if (!notify || ::inotify_add_watch(notify.get(), dir_.c_str(), IN_MOVED_TO) < 0) {
      COHORT_LOG_WARN("cannot watch {} for flight records (errno {}); not asking ranks for them",
                      dir_, errno);
      return;
    }
    struct Waiting {
      int rank;
      UniqueFd exited;  // pidfd: readable once the process is gone (-1 on old kernels)
    };
    std::vector<Waiting> waiting;
    for (const RankPid& r : ranks) {
      // A process without a handler would die of SIGUSR1: only ask those that catch it.
      if (!catches_signal(r.pid, SIGUSR1)) continue;
      UniqueFd exited = open_pidfd(r.pid);
      if (::kill(r.pid, SIGUSR1) != 0) continue;
      waiting.push_back({r.rank, std::move(exited)});
    }
    const Clock::time_point deadline = Clock::now() + limit;
    while (!waiting.empty()) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0) {
        COHORT_LOG_WARN("{} rank(s) wrote no flight record within {} ms", waiting.size(),
                        limit.count());
        return;
      }
      std::vector<pollfd> fds{{notify.get(), POLLIN, 0}};
      for (const Waiting& w : waiting)
        if (w.exited) fds.push_back({w.exited.get(), POLLIN, 0});
      if (::poll(fds.data(), fds.size(), static_cast<int>(left.count())) < 0 && errno != EINTR)
        return;
      std::set<int> answered;
      alignas(inotify_event) char events[4096];
      for (ssize_t n; (n = ::read(notify.get(), events, sizeof events)) > 0;) {
        for (char* at = events; at < events + n;) {
          const auto* event = reinterpret_cast<const inotify_event*>(at);
          if (event->len > 0) answered.insert(rank_of_record(event->name));
          at += sizeof(inotify_event) + event->len;
        }
      }
      std::vector<Waiting> still;
      for (Waiting& w : waiting) {
        pollfd pfd{w.exited.get(), POLLIN, 0};
        const bool gone = w.exited && ::poll(&pfd, 1, 0) > 0;
        if (!gone && answered.count(w.rank) == 0) still.push_back(std::move(w));
      }
      waiting = std::move(still);
    }
  } catch (const std::exception& e) {
    COHORT_LOG_WARN("asking the ranks for flight records failed: {}", e.what());
  }
}

std::vector<std::string> JobFlightRecords::verdict_lines() noexcept {
  try {
    std::vector<std::string> problems;
    const std::vector<trace::RankDump> dumps =
        trace::read_dumps({dir_}, problems, owned_ ? std::nullopt : std::optional(started_));
    if (dumps.empty() && problems.empty()) return {};
    keep_ = true;
    std::vector<std::string> lines{"flight records in " + dir_ + " (cohort-trace " + dir_ +
                                   " for more):"};
    for (const std::string& problem : problems) lines.push_back("  skipped " + problem);
    std::istringstream text(trace::format_verdicts(trace::judge(dumps), 6));
    for (std::string line; std::getline(text, line);) lines.push_back("  " + line);
    return lines;
  } catch (const std::exception& e) {
    return {"could not judge the flight records in " + dir_ + ": " + e.what()};
  }
}

}  // namespace cohort::run
