#include "core/fork_generation.hpp"

#include "core/log.hpp"

#include <atomic>
#include <cstring>

#include <pthread.h>

namespace cohort {
namespace {

std::atomic<std::uint32_t> g_generation{0};

void count_fork_in_child() noexcept {
  g_generation.fetch_add(1, std::memory_order_relaxed);
}

// Installed at load, before the program can fork: a handler installed later would miss the
// forks before it.
const bool g_installed = [] {
  if (const int err = ::pthread_atfork(nullptr, nullptr, count_fork_in_child)) {
    COHORT_LOG_WARN(
        "pthread_atfork failed ({}): a forked child cannot tell the parent's "
        "unfinished ops from its own",
        std::strerror(err));
    return false;
  }
  return true;
}();

}  // namespace

std::uint32_t fork_generation() noexcept {
  return g_generation.load(std::memory_order_relaxed);
}

}  // namespace cohort
