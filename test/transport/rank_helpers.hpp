#pragma once

// Helpers shared by the multi-process transport tests: checks that fail the rank (and so the
// launch), bounded launches, the job's store, and deadlines.

#include "transport/transport.hpp"

#include <cohort/launch.hpp>
#include <cohort/store.hpp>

#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>

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

}  // namespace cohort::test
