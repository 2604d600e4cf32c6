// ProcessWatch: a live process stays alive while signals keep interrupting the look (a
// profiler's timer, the flight recorder's SIGUSR1), and a process that exited is seen as gone.

#include "transport/process_watch.hpp"

#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>

namespace {

std::atomic<std::uint64_t> ticks{0};

void count_tick(int) {
  ticks.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace

TEST_CASE("process watch: a live process stays alive while signals interrupt the look",
          "[transport]") {
  using cohort::transport::ProcessWatch;
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    pause();  // until killed
    _exit(0);
  }
  ProcessWatch watch(child);
  // A handler without SA_RESTART, ticking every 20 us: some ticks land inside the look's
  // poll(), which then fails with EINTR. Counted as a death, that is the bug.
  struct sigaction action {};
  action.sa_handler = &count_tick;
  sigemptyset(&action.sa_mask);
  struct sigaction previous {};
  REQUIRE(sigaction(SIGALRM, &action, &previous) == 0);
  itimerval timer{{0, 20}, {0, 20}};
  REQUIRE(setitimer(ITIMER_REAL, &timer, nullptr) == 0);
  std::uint64_t looks = 0, dead = 0;
  while (ticks.load(std::memory_order_relaxed) < 20000) {
    ++looks;
    if (!watch.alive()) ++dead;
  }
  itimerval off{};
  setitimer(ITIMER_REAL, &off, nullptr);
  sigaction(SIGALRM, &previous, nullptr);
  CAPTURE(looks);
  CHECK(dead == 0);

  REQUIRE(kill(child, SIGKILL) == 0);
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  CHECK_FALSE(watch.alive());
}
