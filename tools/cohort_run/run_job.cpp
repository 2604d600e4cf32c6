#include "cohort_run/run_job.hpp"

#include <cohort/error.hpp>
#include <cohort/store.hpp>

#include "bootstrap/socket.hpp"
#include "cohort_run/flight_records.hpp"
#include "cohort_run/interrupt_pipe.hpp"
#include "cohort_run/launcher_store.hpp"
#include "cohort_run/store_watch.hpp"
#include "core/log.hpp"
#include "core/system_error.hpp"
#include "core/tunables.hpp"
#include "launch/echo_log_sink.hpp"
#include "launch/exit_status.hpp"
#include "launch/failure_report.hpp"
#include "launch/free_port.hpp"
#include "launch/rank_supervisor.hpp"
#include "launch/rank_variables.hpp"
#include "launch/terminal_echo.hpp"

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <thread>

#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <unistd.h>

namespace cohort::run {
namespace {

using SteadyClock = std::chrono::steady_clock;
using cohort::UniqueFd;

constexpr std::size_t kStderrTailLines = 10;
constexpr int kTimeoutExitCode = 124;  // as timeout(1)
// After an abort, how long node 0 keeps the store up beyond the grace period so the other
// nodes' launchers can read why and report their stopped ranks.
constexpr std::chrono::seconds kAbortLinger{15};
constexpr std::chrono::milliseconds kStorePollInterval{100};
// How long the failure summary waits for a terminal that stopped reading.
constexpr std::chrono::milliseconds kReportEchoWait{5000};

std::string resolve_token(const JobConfig& config) {
  const std::string& from_env = tunables().token;
  if (!config.standalone && !from_env.empty()) return from_env;
  if (config.nnodes > 1) {
    throw Error(ErrorCode::InvalidArgument,
                "--nnodes " + std::to_string(config.nnodes) +
                    " needs COHORT_TOKEN: export the same secret to every node's cohort-run "
                    "(e.g. COHORT_TOKEN=$(od -An -tx1 -N16 /dev/urandom | tr -d ' \\n'))");
  }
  return launcher::random_token();
}

UniqueFd open_log_file(const std::filesystem::path& path) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!fd) throw system_error("cannot open rank log file " + path.string(), errno);
  return fd;
}

// Argument and environment vectors for execvpe, built before fork (the child may only do
// async-signal-safe work: node 0 runs the store server's thread).
struct ExecImage {
  std::vector<std::string> argv_storage;
  std::vector<std::string> env_storage;
  std::vector<char*> argv;
  std::vector<char*> envp;

  ExecImage(std::vector<std::string> args, std::vector<std::string> env)
      : argv_storage(std::move(args)), env_storage(std::move(env)) {
    for (std::string& arg : argv_storage) argv.push_back(arg.data());
    argv.push_back(nullptr);
    for (std::string& entry : env_storage) envp.push_back(entry.data());
    envp.push_back(nullptr);
  }

  int exec() const {
    ::execvpe(argv[0], argv.data(), envp.data());
    const int err = errno;
    const char* reason = ::strerror(err);
    const char* prefix = "cohort-run: cannot execute '";
    launcher::write_all(STDERR_FILENO, prefix, std::strlen(prefix));
    launcher::write_all(STDERR_FILENO, argv[0], std::strlen(argv[0]));
    launcher::write_all(STDERR_FILENO, "': ", 3);
    launcher::write_all(STDERR_FILENO, reason, std::strlen(reason));
    launcher::write_all(STDERR_FILENO, "\n", 1);
    return err == ENOENT ? 127 : 126;  // the shell's codes for "not found" / "not executable"
  }
};

class NodeJob {
 public:
  explicit NodeJob(const JobConfig& config) : config_(config) {
    if (config_.timeout) deadline_ = SteadyClock::now() + *config_.timeout;
  }

  int run() {
    InterruptPipe interrupts;  // first: a Ctrl-C during setup must not be lost
    // Our own warnings, from any thread, go where the ranks' stderr goes and never block.
    launcher::log_through_terminal_echo(STDERR_FILENO);
    ::signal(SIGPIPE, SIG_IGN);  // a closed terminal must not kill the launcher
    // Descendants orphaned by a dying rank are re-parented to us, so we can reap them: no
    // zombie outlives the job.
    if (::prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) throw system_error("prctl(SUBREAPER)", errno);
    token_ = resolve_token(config_);
    connect_store();
    start_ranks();
    {
      BlockedInterrupts blocked;  // the watch's thread leaves the signals to this one
      watch_ = std::make_unique<JobStoreWatch>(launchers_, config_.nnodes > 1, kStorePollInterval,
                                               store_name());
    }

    launcher::SupervisorHooks hooks;
    hooks.interrupt_fd = interrupts.fd();
    hooks.deadline = deadline_;
    hooks.grace = config_.grace;
    hooks.reap_orphans = true;
    hooks.on_first_failure = [this](const launcher::RankFailure& failure) {
      // The other nodes learn of it through the watch's thread; our ranks are stopped at once,
      // whether or not node 0 answers.
      watch_->publish(JobAbort{failure, failure.status.shell_code(), config_.node_rank, {}});
      // Before the others are stopped: their flight records say where each one was.
      request_flight_records();
    };
    if (config_.nnodes > 1) {
      hooks.should_stop = [this] {
        std::optional<std::string> reason = watch_->stop_reason();
        if (reason) request_flight_records();
        return reason;
      };
    }
    const launcher::RankSupervisorResult result =
        launcher::supervise_ranks(ranks_, config_.node_rank, hooks);

    settle_outcome(result, interrupts.fd());
    watch_.reset();
    finish_node(interrupts.fd());
    report(result);
    // Whatever was logged after the ranks' last lines, within the echo's bound (spent once).
    for (const int fd : {STDOUT_FILENO, STDERR_FILENO})
      launcher::TerminalEcho::shared(fd)->drain(kReportEchoWait);
    return abort_ ? abort_->exit_code : 0;
  }

 private:
  void connect_store() {
    // Threads the store starts must leave the interrupt signals to this thread.
    BlockedInterrupts blocked;
    store_port_ = config_.master_port;
    store_addr_ = config_.master_addr;
    if (config_.node_rank == 0) {
      TcpStoreOptions options;
      // Listen where the ranks and the other nodes are told to connect, not on every interface.
      options.host = bootstrap::store_bind_address(config_.master_addr, config_.nnodes);
      options.port = config_.master_port;
      options.token = token_;
      server_ = std::make_unique<TcpStoreServer>(options);
      store_port_ = server_->port();
      COHORT_LOG_INFO("store listening on {}:{}", server_->host(), store_port_);
    }
    master_port_ = port_for_torch();
    TcpStoreOptions options;
    options.host = store_addr_;
    options.port = store_port_;
    options.token = token_;
    options.io_timeout = config_.store_timeout;
    launchers_ = std::make_shared<LauncherStore>(std::make_shared<TcpStore>(options));
  }

  // MASTER_PORT for the ranks: torch.distributed's rank 0 binds a store of its own there, so it
  // cannot be the port cohort's store holds. The one beside it when the port was given (every
  // node derives the same), else one free here now (one node: rank 0 runs here).
  std::uint16_t port_for_torch() const {
    if (config_.master_port == 0) return launcher::unused_tcp_port();
    return launcher::torch_port_beside(config_.master_port);
  }

  // Every rank dumps its flight records into one directory per job (flight_records.hpp): the
  // user's COHORT_TRACE_DIR (from --env or the environment) or one of our own.
  std::string user_trace_dir() const {
    std::string dir = tunables().trace_dir.value_or(std::string());
    for (const auto& [name, value] : config_.extra_env)
      if (name == "COHORT_TRACE_DIR") dir = value;
    return dir;
  }

  void request_flight_records() noexcept {
    std::vector<RankPid> running;
    for (const launcher::RankProcess& rank : ranks_)
      if (rank.process.running()) running.push_back({rank.rank, rank.process.pid()});
    flight_records_->request_dumps(running, kDumpWait);
  }

  void start_ranks() {
    if (!config_.log_dir.empty()) std::filesystem::create_directories(config_.log_dir);
    flight_records_ = std::make_unique<JobFlightRecords>(user_trace_dir());
    const std::vector<std::string> base = launcher::current_environment();
    for (int local = 0; local < config_.nproc_per_node; ++local) {
      launcher::RankPlacement placement;
      placement.rank = config_.node_rank * config_.nproc_per_node + local;
      placement.world_size = config_.world_size();
      placement.local_rank = local;
      placement.local_world_size = config_.nproc_per_node;
      placement.node_rank = config_.node_rank;
      placement.num_nodes = config_.nnodes;
      placement.store_addr = store_addr_;
      placement.store_port = store_port_;
      placement.token = token_;
      placement.master_port = master_port_;
      launcher::EnvironmentVariables variables = launcher::rank_variables(placement);
      variables.emplace_back("COHORT_TRACE_DIR", flight_records_->dir());
      const ExecImage image(
          config_.command, launcher::merge_environment(launcher::merge_environment(base, variables),
                                                       config_.extra_env));

      UniqueFd out_log, err_log;
      if (!config_.log_dir.empty()) {
        const std::filesystem::path dir(config_.log_dir);
        const std::string name = "rank" + std::to_string(placement.rank);
        out_log = open_log_file(dir / (name + ".out"));
        err_log = open_log_file(dir / (name + ".err"));
      }
      launcher::SpawnedChild child = launcher::fork_child([&image] { return image.exec(); });
      const std::string prefix =
          config_.tag_output ? "[rank " + std::to_string(placement.rank) + "] " : "";
      ranks_.push_back(launcher::RankProcess{
          placement.rank, local, std::move(child.process),
          launcher::OutputStream(std::move(child.stdout_read), STDOUT_FILENO, std::move(out_log),
                                 prefix, 0),
          launcher::OutputStream(std::move(child.stderr_read), STDERR_FILENO, std::move(err_log),
                                 prefix, kStderrTailLines)});
    }
  }

  std::string store_name() const { return store_addr_ + ":" + std::to_string(store_port_); }

  // Publishing outside supervision (node 0 waiting for the others): may fail when the store is
  // gone; we still report our own view.
  JobAbort publish(const JobAbort& abort) {
    try {
      return launchers_->publish_abort(abort);
    } catch (const Error& e) {
      COHORT_LOG_WARN("could not tell the other nodes that the job stopped: {}", e.what());
      return abort;
    }
  }

  // What the job's end is, once the ranks are gone: our abort as published (or the job's first,
  // when another node's came before it), another node's, or none.
  void settle_outcome(const launcher::RankSupervisorResult& result, int interrupt_fd) {
    switch (result.outcome) {
      case launcher::JobOutcome::Success:
      case launcher::JobOutcome::RankFailed:  // published by on_first_failure
      case launcher::JobOutcome::StopRequested: break;
      case launcher::JobOutcome::Interrupted:
        watch_->publish(JobAbort{std::nullopt, 128 + result.interrupt_signal, config_.node_rank,
                                 "cohort-run on node " + std::to_string(config_.node_rank) +
                                     " received " +
                                     launcher::signal_name(result.interrupt_signal)});
        break;
      case launcher::JobOutcome::TimedOut:
        watch_->publish(JobAbort{std::nullopt, kTimeoutExitCode, config_.node_rank,
                                 "the job exceeded --timeout " +
                                     std::to_string(config_.timeout->count() / 1000.0) + " s"});
        break;
    }
    const JobStoreWatch::Settled settled = await_store_verdict(interrupt_fd);
    abort_ = settled.abort;
    if (settled.store_error) {
      lost_store_ = true;
      if (result.outcome != launcher::JobOutcome::Success &&
          result.outcome != launcher::JobOutcome::StopRequested) {
        COHORT_LOG_WARN("could not tell the other nodes that the job stopped: {}",
                        *settled.store_error);
      }
    }
    if (!abort_ && result.outcome == launcher::JobOutcome::StopRequested)
      abort_ = JobAbort{std::nullopt, 1, config_.node_rank, result.stop_reason};
    // Interrupted while telling the other nodes: the job did not end as it would have.
    if (!abort_ && pending_stop_)
      abort_ = JobAbort{std::nullopt, 128 + *pending_stop_, config_.node_rank,
                        "cohort-run on node " + std::to_string(config_.node_rank) + " received " +
                            launcher::signal_name(*pending_stop_)};
  }

  // The watch's thread finishes the poll in flight (a check and a read) and the publication,
  // each call bounded by the client's io_timeout; a signal meanwhile stops waiting (our ranks
  // are gone already).
  JobStoreWatch::Settled await_store_verdict(int interrupt_fd) {
    const SteadyClock::time_point until = SteadyClock::now() + 3 * config_.store_timeout;
    for (;;) {
      JobStoreWatch::Settled settled = watch_->settle(kStorePollInterval);
      if (!settled.pending) return settled;
      const bool interrupted = stop_signal(interrupt_fd, std::chrono::milliseconds(0)).has_value();
      if (interrupted || SteadyClock::now() >= until) {
        settled.store_error = interrupted ? "interrupted while telling the other nodes"
                                          : "the store did not answer in time";
        return settled;
      }
    }
  }

  // Marks this node finished; node 0 then keeps the store up until every node is finished
  // (bounded), since their ranks and launchers may still need it.
  void finish_node(int interrupt_fd) {
    if (lost_store_) return;
    try {
      launchers_->mark_node_finished(config_.node_rank);
      if (config_.node_rank != 0) {
        // Our ranks are done; the job may have failed elsewhere meanwhile.
        if (!abort_) abort_ = launchers_->published_abort();
        return;
      }
      if (config_.nnodes > 1) wait_for_other_nodes(interrupt_fd);
    } catch (const Error& e) {
      COHORT_LOG_WARN("coordinating the end of the job with the other nodes failed: {}", e.what());
    }
  }

  void wait_for_other_nodes(int interrupt_fd) {
    auto linger_deadline = [&] { return SteadyClock::now() + config_.grace + kAbortLinger; };
    SteadyClock::time_point until =
        abort_ ? linger_deadline() : SteadyClock::now() + default_store_timeout();
    if (!abort_ && deadline_) until = std::min(until, *deadline_);
    for (;;) {
      const std::vector<int> missing = launchers_->unfinished_nodes(config_.nnodes);
      if (missing.empty()) return;
      if (SteadyClock::now() >= until) {
        launcher::TerminalEcho::shared(STDERR_FILENO)
            ->write_line("cohort-run: node(s) " + launcher::join_ranks(missing) +
                         " never reported finishing; closing the store\n");
        if (!abort_) abort_ = JobAbort{std::nullopt, 1, 0, "nodes did not finish"};
        return;
      }
      if (!abort_) {
        if ((abort_ = launchers_->published_abort())) until = linger_deadline();
      }
      if (const std::optional<int> signal = stop_signal(interrupt_fd, kStorePollInterval)) {
        pending_stop_.reset();  // acted on here
        if (!abort_) {
          abort_ =
              publish(JobAbort{std::nullopt, 128 + *signal, 0,
                               "cohort-run on node 0 received " + launcher::signal_name(*signal)});
          until = linger_deadline();
        }
      }
    }
  }

  /// A signal to the launcher that stops the job, waiting up to `wait` for one. SIGUSR1 and
  /// SIGUSR2 bytes are dropped: they go to running ranks, and ours have ended. One seen and not
  /// yet acted on stays pending for the next call.
  std::optional<int> stop_signal(int interrupt_fd, std::chrono::milliseconds wait) {
    if (pending_stop_) return pending_stop_;
    pollfd pfd{interrupt_fd, POLLIN, 0};
    if (::poll(&pfd, 1, static_cast<int>(wait.count())) <= 0) return std::nullopt;
    unsigned char signals[16];
    const ssize_t n = ::read(interrupt_fd, signals, sizeof signals);
    for (ssize_t i = 0; i < n && !pending_stop_; ++i)
      if (!launcher::passed_to_ranks(signals[i])) pending_stop_ = signals[i];
    return pending_stop_;
  }

  void report(const launcher::RankSupervisorResult& result) {
    if (!abort_) return;
    std::string text;
    if (abort_->failure) {
      text = launcher::failure_summary(*abort_->failure, config_.world_size(), config_.node_rank,
                                       result.stopped_ranks, result.killed_ranks,
                                       flight_records_->verdict_lines());
    } else {
      text = "cohort-run: ===== job stopped =====\ncohort-run: " + abort_->reason + "\n";
      text += "cohort-run: stopped ranks on node " + std::to_string(config_.node_rank) + ": " +
              (result.stopped_ranks.empty() ? std::string("none (none were running)")
                                            : launcher::join_ranks(result.stopped_ranks));
      if (!result.killed_ranks.empty()) {
        text +=
            " (SIGKILL after the grace period: " + launcher::join_ranks(result.killed_ranks) + ")";
      }
      text += "\n";
      for (const std::string& line : flight_records_->verdict_lines())
        text += "cohort-run: " + line + "\n";
      text += "cohort-run: exit code " + std::to_string(abort_->exit_code) + "\n";
    }
    if (!result.abandoned_ranks.empty()) {
      text += "cohort-run: left behind, not reapable after SIGKILL: rank(s) " +
              launcher::join_ranks(result.abandoned_ranks) + " (pid and state logged above)\n";
    }
    // Through the terminal's echo, after the ranks' last lines and within its bound: a
    // terminal that stopped reading must not keep the job from ending.
    const std::shared_ptr<launcher::TerminalEcho> echo =
        launcher::TerminalEcho::shared(STDERR_FILENO);
    echo->write_line(std::move(text));
    echo->drain(kReportEchoWait);
  }

  const JobConfig& config_;
  std::optional<SteadyClock::time_point> deadline_;
  std::string token_;
  std::string store_addr_;
  std::uint16_t store_port_ = 0;
  std::uint16_t master_port_ = 0;
  std::unique_ptr<TcpStoreServer> server_;
  std::shared_ptr<LauncherStore> launchers_;  // shared with the watch's thread
  // The store calls made while the ranks run (see store_watch.hpp); gone before finish_node().
  std::unique_ptr<JobStoreWatch> watch_;
  // Removes its directory (when ours and not needed) after the ranks are gone.
  std::unique_ptr<JobFlightRecords> flight_records_;
  // Declared after the store: ranks are killed and reaped before the store goes away.
  std::vector<launcher::RankProcess> ranks_;
  std::optional<JobAbort> abort_;
  bool lost_store_ = false;
  std::optional<int> pending_stop_;  ///< a stop signal stop_signal() saw, not yet acted on
};

}  // namespace

int run_job(const JobConfig& config) {
  return NodeJob(config).run();
}

}  // namespace cohort::run
