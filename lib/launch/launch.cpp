// cohort::launch(): cohort-run's machinery driven from code. The parent forks every child
// first and only then starts the store server, so no child inherits a running server thread
// (a lock held by it at fork time would deadlock the child); each child waits for the store's
// port on a control pipe, exports the rank variables, and calls fn.

#include <cohort/error.hpp>
#include <cohort/launch.hpp>
#include <cohort/store.hpp>

#include "core/log.hpp"
#include "launch/failure_report.hpp"
#include "launch/rank_supervisor.hpp"
#include "launch/rank_variables.hpp"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <string>

#include <poll.h>
#include <unistd.h>

namespace cohort {
namespace {

using cohort::UniqueFd;

constexpr std::size_t kStderrTailLines = 10;
// How long a child waits for the parent to publish the store port: the parent only has to
// start a server, so this is a generous bound for a parent that threw before publishing.
constexpr int kPortWaitMillis = 60'000;

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

int run_rank(int rank, int world_size, int control_fd, const std::string& token,
             const std::function<void(const Environment&)>& fn) {
  const std::uint16_t port = read_store_port(control_fd);
  ::close(control_fd);
  if (port == 0) {
    std::fprintf(stderr, "rank %d: the launching process never published its store\n", rank);
    return 1;
  }
  launcher::RankPlacement placement;
  placement.rank = rank;
  placement.world_size = world_size;
  placement.local_rank = rank;
  placement.local_world_size = world_size;
  placement.store_addr = "127.0.0.1";
  placement.store_port = port;
  placement.token = token;
  // Exported too, so code in fn calling cohort::init()/resolve_environment() sees this rank.
  for (const auto& [key, value] : launcher::rank_variables(placement)) {
    ::setenv(key.c_str(), value.c_str(), 1);
  }
  Environment env;
  env.rank = rank;
  env.world_size = world_size;
  env.local_rank = rank;
  env.local_world_size = world_size;
  env.node_rank = 0;
  env.num_nodes = 1;
  env.store_addr = placement.store_addr;
  env.store_port = port;
  env.token = token;
  env.source = LaunchSource::Cohort;
  try {
    fn(env);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: exception: %s\n", rank, e.what());
    return 1;
  } catch (...) {
    std::fprintf(stderr, "rank %d: exception of unknown type\n", rank);
    return 1;
  }
  std::cout.flush();
  std::cerr.flush();
  return 0;
}

void validate(int world_size, const std::function<void(const Environment&)>& fn,
              const LaunchOptions& options) {
  if (world_size < 1) {
    throw Error(ErrorCode::InvalidArgument,
                "cohort::launch: world_size must be at least 1, got " + std::to_string(world_size));
  }
  if (!fn) throw Error(ErrorCode::InvalidArgument, "cohort::launch: fn is empty");
  if (options.grace.count() < 0) {
    throw Error(ErrorCode::InvalidArgument, "cohort::launch: grace must not be negative, got " +
                                                std::to_string(options.grace.count()) + " ms");
  }
  if (options.timeout.count() < 0) {
    throw Error(ErrorCode::InvalidArgument, "cohort::launch: timeout must not be negative, got " +
                                                std::to_string(options.timeout.count()) + " ms");
  }
}

}  // namespace

void launch(int world_size, const std::function<void(const Environment&)>& fn,
            const LaunchOptions& options) {
  validate(world_size, fn, options);
  const std::string token = launcher::random_token();

  std::vector<launcher::RankProcess> ranks;
  std::vector<UniqueFd> control_writers;
  ranks.reserve(static_cast<std::size_t>(world_size));
  for (int rank = 0; rank < world_size; ++rank) {
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
        [&] { return run_rank(rank, world_size, control_read, token, fn); }, parent_fds);
    control.read.reset();
    control_writers.push_back(std::move(control.write));

    const std::string prefix = "[rank " + std::to_string(rank) + "] ";
    ranks.push_back(launcher::RankProcess{
        rank, rank, std::move(child.process),
        launcher::OutputStream(std::move(child.stdout_read), STDOUT_FILENO, {}, prefix, 0),
        launcher::OutputStream(std::move(child.stderr_read), STDERR_FILENO, {}, prefix,
                               kStderrTailLines)});
  }

  TcpStoreOptions store_options;
  store_options.host = "127.0.0.1";
  store_options.port = 0;
  store_options.token = token;
  TcpStoreServer server(store_options);
  const std::string port_line = std::to_string(server.port()) + "\n";
  for (UniqueFd& writer : control_writers) {
    // A child that already died has closed its end; the supervisor reports it.
    launcher::write_all(writer.get(), port_line.data(), port_line.size());
    writer.reset();
  }

  launcher::SupervisorHooks hooks;
  hooks.grace = options.grace;
  if (options.timeout.count() > 0)
    hooks.deadline = std::chrono::steady_clock::now() + options.timeout;
  const launcher::RankSupervisorResult result = launcher::supervise_ranks(ranks, 0, hooks);

  switch (result.outcome) {
    case launcher::JobOutcome::Success:
      return;
    case launcher::JobOutcome::TimedOut:
      throw Error(ErrorCode::Timeout,
                  "cohort::launch: the job of " + std::to_string(world_size) +
                      " ranks did not finish within " + std::to_string(options.timeout.count()) +
                      " ms; ranks still running: " + launcher::join_ranks(result.stopped_ranks));
    case launcher::JobOutcome::RankFailed:
      throw Error(ErrorCode::RemoteError,
                  "cohort::launch: " + launcher::describe_failure(*result.failure, world_size,
                                                                  result.stopped_ranks));
    case launcher::JobOutcome::Interrupted:
    case launcher::JobOutcome::StopRequested:
      break;
  }
  throw Error(ErrorCode::Internal, "cohort::launch: the job stopped for an unexpected reason");
}

}  // namespace cohort
