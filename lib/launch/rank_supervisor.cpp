#include "launch/rank_supervisor.hpp"

#include "core/log.hpp"
#include "core/system_error.hpp"

#include <algorithm>
#include <cerrno>
#include <csignal>

#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

namespace cohort::launcher {
namespace {

using SteadyClock = std::chrono::steady_clock;

// Upper bound on one poll(): reaping does not depend on pipe activity (a rank may close its
// output and keep running), so we look at the children at least this often.
constexpr std::chrono::milliseconds kMaxPollWait{50};
// How long a subreaper launcher waits at the end for SIGKILLed group members to be reapable.
constexpr std::chrono::milliseconds kOrphanReapWait{2000};
// How long the end of a job waits for a stalled terminal to take the ranks' last lines.
constexpr std::chrono::milliseconds kFinalEchoWait{5000};

class Supervision {
 public:
  Supervision(std::vector<RankProcess>& ranks, int node_rank, const SupervisorHooks& hooks)
      : ranks_(ranks), node_rank_(node_rank), hooks_(hooks) {}

  RankSupervisorResult run() {
    next_stop_poll_ = SteadyClock::now();
    while (any_running()) {
      wait_for_activity();
      reap_exited();
      const auto now = SteadyClock::now();
      if (!stopping_) check_external_reasons(now);
      if (stopping_ && !killed_ && now >= kill_at_) kill_survivors();
      if (killed_ && now >= killed_at_ + ChildProcess::kReapAfterKillWait) abandon_unreapable();
    }
    // What a rank left in its group (a backgrounded command) was killed as it was reaped.
    if (hooks_.reap_orphans) reap_orphans_until_gone();
    for (RankProcess& rank : ranks_) result_.statuses.push_back(*rank.process.status());
    // What the terminal has not taken yet, within a bound: a terminal nobody reads must not
    // keep the job from ending.
    const auto echo_until = SteadyClock::now() + kFinalEchoWait;
    for (RankProcess& rank : ranks_) {
      for (OutputStream* stream : {&rank.out, &rank.err}) {
        stream->drain_terminal(std::chrono::ceil<std::chrono::milliseconds>(
            std::max(echo_until - SteadyClock::now(), SteadyClock::duration::zero())));
      }
    }
    std::sort(result_.stopped_ranks.begin(), result_.stopped_ranks.end());
    std::sort(result_.killed_ranks.begin(), result_.killed_ranks.end());
    return std::move(result_);
  }

 private:
  bool any_running() const {
    return std::any_of(ranks_.begin(), ranks_.end(),
                       [](const RankProcess& r) { return r.process.running(); });
  }

  std::chrono::milliseconds poll_wait() const {
    auto wait = kMaxPollWait;
    const auto now = SteadyClock::now();
    auto until = [&](SteadyClock::time_point t) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(t - now);
      wait = std::clamp(left, std::chrono::milliseconds(0), wait);
    };
    if (stopping_ && !killed_) until(kill_at_);
    if (killed_) until(killed_at_ + ChildProcess::kReapAfterKillWait);
    if (!stopping_ && hooks_.deadline) until(*hooks_.deadline);
    if (!stopping_ && hooks_.should_stop) until(next_stop_poll_);
    return wait;
  }

  void wait_for_activity() {
    std::vector<pollfd> fds;
    std::vector<OutputStream*> streams;
    for (RankProcess& rank : ranks_) {
      for (OutputStream* stream : {&rank.out, &rank.err}) {
        if (!stream->is_open()) continue;
        fds.push_back(pollfd{stream->fd(), POLLIN, 0});
        streams.push_back(stream);
      }
    }
    if (hooks_.interrupt_fd >= 0) fds.push_back(pollfd{hooks_.interrupt_fd, POLLIN, 0});

    const int ready = ::poll(fds.data(), fds.size(), static_cast<int>(poll_wait().count()));
    if (ready < 0) {
      if (errno == EINTR) return;
      throw system_error("poll on rank output", errno);
    }
    for (std::size_t i = 0; i < streams.size(); ++i) {
      if (fds[i].revents != 0) streams[i]->read_available();
    }
    // Lines the terminal did not take when they came go as it takes them (never waiting).
    for (RankProcess& rank : ranks_) {
      rank.out.flush_terminal();
      rank.err.flush_terminal();
    }
    if (hooks_.interrupt_fd >= 0 && fds.back().revents != 0) handle_interrupts();
  }

  void handle_interrupts() {
    unsigned char signals[16];
    const ssize_t n = ::read(hooks_.interrupt_fd, signals, sizeof signals);
    for (ssize_t i = 0; i < n; ++i) {
      const int signal = signals[i];
      if (passed_to_ranks(signal)) {
        // The application's own signals (Slurm's --signal=USR1@120 checkpoint warning, the
        // flight recorder's dump): to each rank's process, not its group, whose other members
        // may not expect them; the job goes on.
        for (RankProcess& rank : ranks_) rank.process.signal(signal);
        continue;
      }
      if (!stopping_) {
        result_.outcome = JobOutcome::Interrupted;
        result_.interrupt_signal = signal;
        begin_stop(signal);
      } else if (!killed_) {
        // A second interrupt means "now": skip the rest of the grace period (killed before
        // the line is logged: where the log is a plain write to stderr, as under
        // cohort::launch(), a stalled terminal may hold it; cohort-run's goes through its echo).
        kill_survivors();
        COHORT_LOG_WARN("second {} while stopping: killed every rank", signal_name(signal));
      }
    }
  }

  void reap_exited() {
    if (hooks_.reap_orphans) {
      reap_any_children();
      return;
    }
    for (RankProcess& rank : ranks_) {
      if (!rank.process.running()) continue;
      if (const std::optional<ExitStatus> status = rank.process.try_reap()) on_exit(rank, *status);
    }
  }

  // As a subreaper we may be the parent of a rank's orphaned descendants: reap whatever exited
  // and route the ranks' statuses to them.
  void reap_any_children() {
    for (;;) {
      // Which child ended, without reaping it: a rank is reaped by its handle, which first
      // kills what it left in its group (see ChildProcess::try_reap).
      siginfo_t info{};
      if (::waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) < 0) {
        if (errno == EINTR) continue;
        return;  // ECHILD: no children
      }
      const pid_t pid = info.si_pid;
      if (pid == 0) return;  // none has ended
      const auto rank = std::find_if(ranks_.begin(), ranks_.end(), [&](const RankProcess& r) {
        return r.process.running() && r.process.pid() == pid;
      });
      if (rank != ranks_.end()) {
        if (const std::optional<ExitStatus> status = rank->process.try_reap())
          on_exit(*rank, *status);
        continue;
      }
      int status = 0;
      while (::waitpid(pid, &status, WNOHANG) < 0 && errno == EINTR) {
      }
      COHORT_LOG_DEBUG("reaped orphaned descendant {} of a rank", pid);
    }
  }

  // Members of the ranks' groups were just SIGKILLed; collect them so none stays a zombie. A
  // descendant that left the group (setsid) is not ours to wait for: the bound covers it.
  void reap_orphans_until_gone() {
    const auto until = SteadyClock::now() + kOrphanReapWait;
    for (;;) {
      int status = 0;
      const pid_t pid = ::waitpid(-1, &status, WNOHANG);
      if (pid > 0 || (pid < 0 && errno == EINTR)) continue;
      if (pid < 0 || SteadyClock::now() >= until) return;  // ECHILD: nothing left
      ::usleep(5'000);
    }
  }

  void on_exit(RankProcess& rank, const ExitStatus& status) {
    rank.out.finish();
    rank.err.finish();
    COHORT_LOG_DEBUG("rank {} (pid {}) ended: {}", rank.rank, rank.process.pid(),
                     status.describe());
    if (!status.success() && !stopping_) record_failure(rank, status);
  }

  void record_failure(const RankProcess& rank, const ExitStatus& status) {
    RankFailure failure;
    failure.rank = rank.rank;
    failure.local_rank = rank.local_rank;
    failure.node_rank = node_rank_;
    failure.pid = rank.process.pid();
    failure.status = status;
    failure.stderr_tail.assign(rank.err.tail().begin(), rank.err.tail().end());
    result_.outcome = JobOutcome::RankFailed;
    result_.failure = failure;
    if (hooks_.on_first_failure) hooks_.on_first_failure(failure);
    begin_stop(SIGTERM);
  }

  void check_external_reasons(SteadyClock::time_point now) {
    if (hooks_.deadline && now >= *hooks_.deadline) {
      result_.outcome = JobOutcome::TimedOut;
      begin_stop(SIGTERM);
      return;
    }
    if (hooks_.should_stop && now >= next_stop_poll_) {
      next_stop_poll_ = now + hooks_.stop_poll_interval;
      if (std::optional<std::string> reason = hooks_.should_stop()) {
        result_.outcome = JobOutcome::StopRequested;
        result_.stop_reason = std::move(*reason);
        begin_stop(SIGTERM);
      }
    }
  }

  void begin_stop(int signal) {
    stopping_ = true;
    kill_at_ = SteadyClock::now() + hooks_.grace;
    for (RankProcess& rank : ranks_) {
      if (!rank.process.running()) continue;
      result_.stopped_ranks.push_back(rank.rank);
      rank.process.signal_group(signal);
    }
    if (hooks_.grace.count() <= 0) kill_survivors();
  }

  void kill_survivors() {
    killed_ = true;
    killed_at_ = SteadyClock::now();
    for (RankProcess& rank : ranks_) {
      if (!rank.process.running()) continue;
      result_.killed_ranks.push_back(rank.rank);
      rank.process.signal_group(SIGKILL);
    }
  }

  // Ranks SIGKILLed this long ago and still not reapable sleep uninterruptibly in the kernel (a
  // device driver's call that never returns) or are held by a tracer: nothing the launcher can
  // do ends them, so the job ends without them.
  void abandon_unreapable() {
    for (RankProcess& rank : ranks_) {
      if (!rank.process.running()) continue;
      COHORT_LOG_WARN(
          "rank {} (pid {}) did not exit within {} s of SIGKILL ({}); leaving it behind", rank.rank,
          rank.process.pid(), ChildProcess::kReapAfterKillWait.count(),
          describe_process_state(rank.process.pid()));
      result_.abandoned_ranks.push_back(rank.rank);
      rank.process.abandon();
      rank.out.finish();
      rank.err.finish();
    }
  }

  std::vector<RankProcess>& ranks_;
  int node_rank_;
  const SupervisorHooks& hooks_;
  RankSupervisorResult result_;
  bool stopping_ = false;
  bool killed_ = false;
  SteadyClock::time_point kill_at_{};
  SteadyClock::time_point killed_at_{};
  SteadyClock::time_point next_stop_poll_{};
};

}  // namespace

RankSupervisorResult supervise_ranks(std::vector<RankProcess>& ranks, int node_rank,
                                     const SupervisorHooks& hooks) {
  return Supervision(ranks, node_rank, hooks).run();
}

std::string join_ranks(const std::vector<int>& ranks) {
  std::string text;
  for (int rank : ranks) {
    if (!text.empty()) text += ", ";
    text += std::to_string(rank);
  }
  return text;
}

}  // namespace cohort::launcher
