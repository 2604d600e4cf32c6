#pragma once

// Helpers shared by the multi-process transport tests: checks that fail the rank (and so the
// launch), bounded launches, the job's store, and deadlines.

#include "transport/transport.hpp"
#include "transport/transport_factory.hpp"

#include <cohort/launch.hpp>
#include <cohort/store.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace cohort::test {

using namespace std::chrono_literals;

/// Throws (failing the rank) unless `condition`.
inline void expect(bool condition, const std::string& what) {
  if (!condition) throw std::runtime_error("check failed in rank: " + what);
}

/// A launch that cannot hang the suite: 90 s at most, 2 s grace after a failure.
inline LaunchOptions bounded() {
  LaunchOptions options;
  options.grace = 2s;
  options.timeout = 90s;
  return options;
}

/// A client of the launch's store.
inline std::unique_ptr<TcpStore> open_store(const Environment& env) {
  TcpStoreOptions options;
  options.host = env.store_addr;
  options.port = env.store_port;
  options.token = env.token;
  return std::make_unique<TcpStore>(options);
}

inline transport::Deadline after(std::chrono::milliseconds d) {
  return std::chrono::steady_clock::now() + d;
}

/// This rank's transport over the launch's world, its store keys under `prefix`.
inline std::unique_ptr<transport::Transport> connect(Store& store, const Environment& env,
                                                     const std::string& prefix = "t") {
  transport::TransportOptions options;
  options.local_world_size = env.local_world_size;
  options.connect_timeout = 30s;
  return transport::create_transport(store, prefix, env.rank, env.world_size, options);
}

/// Returns once every rank of the world reached the barrier `name` (through the store).
inline void barrier(Store& store, const std::string& name, int rank, int size) {
  store.set_string(name + "/" + std::to_string(rank), "1");
  std::vector<std::string> keys;
  for (int r = 0; r < size; ++r) keys.push_back(name + "/" + std::to_string(r));
  store.wait(keys, 30s);
}

/// Runs `body` (the rank's part: connect, then wait for a store key) in a child process that
/// then kills itself, and checks that it did. The peers see the rank die, while the launch
/// (which stops everyone when a rank dies) sees the rank itself exit normally.
template <class Body>
void run_in_child_that_dies(Body&& body) {
  const pid_t child = fork();
  if (child == 0) {
    try {
      body();
    } catch (...) {
      _exit(1);  // the check below then fails: the child exited instead of dying
    }
    raise(SIGKILL);
  }
  int status = 0;
  waitpid(child, &status, 0);
  expect(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "child killed itself");
}

}  // namespace cohort::test
