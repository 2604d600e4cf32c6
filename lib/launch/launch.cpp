// cohort::launch(): cohort-run's machinery driven from code. The parent forks every child
// first and only then starts the store server, so no child inherits a running server thread
// (a lock held by it at fork time would deadlock the child); each child waits for the store's
// port on a control pipe, exports the rank variables, runs the caller's setup, and calls fn.
// A launch that joins a larger job (LaunchOptions::join) hosts no store: the port it passes on
// is the joined job's.

#include <cohort/error.hpp>
#include <cohort/launch.hpp>
#include <cohort/store.hpp>
#include <cohort/work.hpp>

#include "core/log.hpp"
#include "launch/failure_report.hpp"
#include "launch/free_port.hpp"
#include "launch/rank_supervisor.hpp"
#include "launch/rank_variables.hpp"

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <poll.h>
#include <unistd.h>

namespace cohort {
namespace {

using cohort::UniqueFd;

constexpr std::size_t kStderrTailLines = 10;
// How long a child waits for the parent to publish the store port: the parent only has to
// start a server, so this is a generous bound for a parent that threw before publishing.
constexpr int kPortWaitMillis = 60'000;

// The whole job as this launch sees it, resolved from the arguments once in the parent.
struct JobLayout {
  int world_size = 1;        // ranks in the job
  int first_rank = 0;        // the rank of this launch's first child
  int num_ranks = 1;         // children of this launch
  int local_world_size = 1;  // ranks per node
  int num_nodes = 1;
  std::string store_addr;        // where the children reach the store
  std::uint16_t store_port = 0;  // 0 until this launch's own server is up
  std::string token;
  std::uint16_t master_port = 0;  // MASTER_PORT (rank_variables.hpp); 0: not exported
};

JobLayout layout_for(int num_ranks, const LaunchOptions& options) {
  JobLayout job;
  job.num_ranks = num_ranks;
  job.first_rank = options.rank_offset;
  job.world_size = options.join ? options.join->world_size : num_ranks;
  job.local_world_size = options.local_world_size > 0 ? options.local_world_size : job.world_size;
  job.num_nodes = (job.world_size + job.local_world_size - 1) / job.local_world_size;
  if (options.join) {
    job.store_addr = options.join->store_addr;
    job.store_port = options.join->store_port;
    job.token = options.join->token;
    // Every launch of the job must name the same port, and only the store's is known to all.
    job.master_port = launcher::torch_port_beside(job.store_port);
  } else {
    job.store_addr = "127.0.0.1";
    job.token = launcher::random_token();
    job.master_port = launcher::unused_tcp_port();
  }
  return job;
}

// Child side: reads "<port>\n" from the control pipe; 0 when the parent gave up.
std::uint16_t read_store_port(int fd) {
  std::string text;
  for (;;) {
    pollfd pfd{fd, POLLIN, 0};
    const int ready = ::poll(&pfd, 1, kPortWaitMillis);
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) return 0;
    char c;
    const ssize_t n = ::read(fd, &c, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return 0;
    if (c == '\n') break;
    text.push_back(c);
  }
  const long port = std::strtol(text.c_str(), nullptr, 10);
  return port > 0 && port < 65536 ? static_cast<std::uint16_t>(port) : 0;
}

// Runs one stage of a rank (setup or fn), turning an escaping exception into the rank's failure
// message on stderr. Returns whether it completed.
bool run_stage(int rank, const char* stage, const std::function<void(const Environment&)>& body,
               const Environment& env) {
  try {
    body(env);
    return true;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: %s: %s\n", rank, stage, e.what());
  } catch (...) {
    std::fprintf(stderr, "rank %d: %s: an exception of unknown type\n", rank, stage);
  }
  return false;
}

int run_rank(const JobLayout& job, int rank, int control_fd,
             const std::function<void(const Environment&)>& setup,
             const std::function<void(const Environment&)>& fn) {
  const std::uint16_t port = read_store_port(control_fd);
  ::close(control_fd);
  if (port == 0) {
    std::fprintf(stderr, "rank %d: the launching process never published its store\n", rank);
    return 1;
  }
  launcher::RankPlacement placement;
  placement.rank = rank;
  placement.world_size = job.world_size;
  placement.local_rank = rank % job.local_world_size;
  placement.local_world_size = job.local_world_size;
  placement.node_rank = rank / job.local_world_size;
  placement.num_nodes = job.num_nodes;
  placement.store_addr = job.store_addr;
  placement.store_port = port;
  placement.token = job.token;
  placement.master_port = job.master_port;
  // Exported too, so code in setup or fn calling cohort::init()/resolve_environment() sees this
  // rank.
  for (const auto& [key, value] : launcher::rank_variables(placement)) {
    ::setenv(key.c_str(), value.c_str(), 1);
  }
  Environment env;
  env.rank = placement.rank;
  env.world_size = placement.world_size;
  env.local_rank = placement.local_rank;
  env.local_world_size = placement.local_world_size;
  env.node_rank = placement.node_rank;
  env.num_nodes = placement.num_nodes;
  env.store_addr = placement.store_addr;
  env.store_port = port;
  env.token = placement.token;
  env.source = LaunchSource::Cohort;
  if (setup && !run_stage(rank, "setup failed", setup, env)) return 1;
  if (!run_stage(rank, "exception", fn, env)) return 1;
  std::cout.flush();
  std::cerr.flush();
  return 0;
}

// "the job of 4 ranks", or for a launch joining a larger job "ranks 2..3 of the job of 4 ranks".
std::string describe_ranks(const JobLayout& job) {
  const std::string whole = "the job of " + std::to_string(job.world_size) + " ranks";
  if (job.num_ranks == job.world_size) return whole;
  return "ranks " + std::to_string(job.first_rank) + ".." +
         std::to_string(job.first_rank + job.num_ranks - 1) + " of " + whole;
}

[[noreturn]] void reject(const std::string& what) {
  throw Error(ErrorCode::InvalidArgument, "cohort::launch: " + what);
}

void validate(int num_ranks, const std::function<void(const Environment&)>& fn,
              const LaunchOptions& options) {
  if (num_ranks < 1) {
    reject("the number of ranks (world_size) must be at least 1, got " + std::to_string(num_ranks));
  }
  if (!fn) reject("fn is empty");
  // Bounded above as every deadline cohort accepts: a deadline is now + the duration.
  if (options.grace.count() < 0 || options.grace > kMaxTimeout) {
    reject("grace must be between 0 and one year, got " + std::to_string(options.grace.count()) +
           " ms");
  }
  if (options.timeout.count() < 0 || options.timeout > kMaxTimeout) {
    reject("timeout must be between 0 and one year, got " +
           std::to_string(options.timeout.count()) + " ms");
  }
  if (options.rank_offset < 0) {
    reject("rank_offset must not be negative, got " + std::to_string(options.rank_offset));
  }
  if (options.local_world_size < 0) {
    reject("local_world_size must not be negative, got " +
           std::to_string(options.local_world_size));
  }
  if (!options.join && options.rank_offset != 0) {
    reject("rank_offset " + std::to_string(options.rank_offset) + " needs options.join: ranks 0.." +
           std::to_string(options.rank_offset - 1) +
           " must be started by someone sharing the job's store");
  }
  int world_size = num_ranks;
  if (options.join) {
    const JoinedJob& job = *options.join;
    world_size = job.world_size;
    if (options.rank_offset + num_ranks > job.world_size) {
      reject("ranks " + std::to_string(options.rank_offset) + ".." +
             std::to_string(options.rank_offset + num_ranks - 1) +
             " do not fit in the joined job of " + std::to_string(job.world_size) + " ranks");
    }
    if (job.store_addr.empty() || job.store_port == 0) {
      reject("the joined job's store is not set (store_addr '" + job.store_addr + "', port " +
             std::to_string(job.store_port) + ")");
    }
  }
  if (options.local_world_size > world_size) {
    reject("local_world_size " + std::to_string(options.local_world_size) +
           " is larger than the job's " + std::to_string(world_size) + " ranks");
  }
}

}  // namespace

void launch(int num_ranks, const std::function<void(const Environment&)>& fn,
            const LaunchOptions& options) {
  validate(num_ranks, fn, options);
  JobLayout job = layout_for(num_ranks, options);

  std::vector<launcher::RankProcess> ranks;
  std::vector<UniqueFd> control_writers;
  ranks.reserve(static_cast<std::size_t>(num_ranks));
  for (int i = 0; i < num_ranks; ++i) {
    const int rank = job.first_rank + i;
    launcher::Pipe control = launcher::make_pipe();
    // Descriptors the child must drop: every parent-side end created so far.
    std::vector<int> parent_fds{control.write.get()};
    for (const launcher::RankProcess& earlier : ranks) {
      parent_fds.push_back(earlier.out.fd());
      parent_fds.push_back(earlier.err.fd());
    }
    for (const UniqueFd& writer : control_writers) parent_fds.push_back(writer.get());

    const int control_read = control.read.get();
    launcher::SpawnedChild child = launcher::fork_child(
        [&] { return run_rank(job, rank, control_read, options.setup, fn); }, parent_fds);
    control.read.reset();
    control_writers.push_back(std::move(control.write));

    const std::string prefix = "[rank " + std::to_string(rank) + "] ";
    ranks.push_back(launcher::RankProcess{
        rank, rank % job.local_world_size, std::move(child.process),
        launcher::OutputStream(std::move(child.stdout_read), STDOUT_FILENO, {}, prefix, 0),
        launcher::OutputStream(std::move(child.stderr_read), STDERR_FILENO, {}, prefix,
                               kStderrTailLines)});
  }

  // Only now, with every child forked, may a server thread start (see the top of this file).
  std::unique_ptr<TcpStoreServer> server;
  if (!options.join) {
    TcpStoreOptions store_options;
    store_options.host = job.store_addr;
    store_options.port = 0;
    store_options.token = job.token;
    server = std::make_unique<TcpStoreServer>(store_options);
    job.store_port = server->port();
  }
  const std::string port_line = std::to_string(job.store_port) + "\n";
  for (UniqueFd& writer : control_writers) {
    // A child that already died has closed its end; the supervisor reports it. Quietly: this
    // is the caller's process, whose SIGPIPE may still kill it.
    launcher::write_all_quietly(writer.get(), port_line.data(), port_line.size());
    writer.reset();
  }

  launcher::SupervisorHooks hooks;
  hooks.grace = options.grace;
  if (options.timeout.count() > 0)
    hooks.deadline = std::chrono::steady_clock::now() + options.timeout;
  launcher::RankSupervisorResult result = launcher::supervise_ranks(ranks, 0, hooks);

  switch (result.outcome) {
    case launcher::JobOutcome::Success: return;
    case launcher::JobOutcome::TimedOut:
      throw Error(ErrorCode::Timeout,
                  "cohort::launch: " + describe_ranks(job) + " did not finish within " +
                      std::to_string(options.timeout.count()) +
                      " ms; ranks still running: " + launcher::join_ranks(result.stopped_ranks));
    case launcher::JobOutcome::RankFailed:
      // The supervisor knows one node; ranks here may span several (local_world_size).
      result.failure->node_rank = result.failure->rank / job.local_world_size;
      throw Error(ErrorCode::RemoteError,
                  "cohort::launch: " + launcher::describe_failure(*result.failure, job.world_size,
                                                                  result.stopped_ranks));
    case launcher::JobOutcome::Interrupted:
    case launcher::JobOutcome::StopRequested: break;
  }
  throw Error(ErrorCode::Internal, "cohort::launch: the job stopped for an unexpected reason");
}

}  // namespace cohort
