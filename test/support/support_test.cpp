// The test-support helpers themselves: the other tests' synchronisation is only as good as these
// are, and blocked_thread.cpp leans on how glibc and Linux report a blocked thread.

#include "support/blocked_thread.hpp"
#include "support/forked_child.hpp"
#include "support/process_exit.hpp"
#include "support/scoped_env.hpp"
#include "support/sync_pipe.hpp"
#include "support/temp_dir.hpp"

#include <catch2/catch.hpp>

#include <atomic>
#include <condition_variable>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <future>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include <poll.h>
#include <pthread.h>
#include <unistd.h>

using namespace cohort::test;
using namespace std::chrono_literals;

TEST_CASE("ScopedEnv sets or removes a variable and restores it", "[support]") {
  const char* name = "COHORT_SUPPORT_TEST_VARIABLE";
  ::unsetenv(name);
  {
    const ScopedEnv set(name, "first");
    CHECK(std::string(std::getenv(name)) == "first");
    {
      const ScopedEnv removed(name, std::nullopt);
      CHECK(std::getenv(name) == nullptr);
    }
    CHECK(std::string(std::getenv(name)) == "first");
  }
  CHECK(std::getenv(name) == nullptr);
}

TEST_CASE("TempDir makes a fresh directory and removes it with its contents", "[support]") {
  std::filesystem::path kept;
  {
    const TempDir a("cohort-support-test");
    const TempDir b("cohort-support-test");
    CHECK(a.path() != b.path());
    CHECK(std::filesystem::is_directory(a.path()));
    CHECK(a.path().filename().string().rfind("cohort-support-test-", 0) == 0);
    std::filesystem::create_directory(a.path() / "sub");
    std::ofstream(a.path() / "sub" / "file") << "x";
    kept = a.path();
  }
  CHECK_FALSE(std::filesystem::exists(kept));
}

TEST_CASE("SyncPipe carries whole notes from several forked writers", "[support]") {
  SyncPipe pipe;
  std::vector<ForkedChild> writers;
  for (int w = 0; w < 4; ++w)
    writers.emplace_back([&pipe, w] {
      for (int k = 0; k < 100; ++k) pipe.post(static_cast<std::uint64_t>(w * 1000 + k));
      return 0;
    });
  std::set<std::uint64_t> seen;
  for (int n = 0; n < 400; ++n) seen.insert(pipe.take(10s));
  for (auto& writer : writers) CHECK(writer.join() == 0);
  CHECK(seen.size() == 400);
  CHECK(*seen.begin() == 0);
  CHECK(*seen.rbegin() == 3099);
  CHECK_THROWS_AS(pipe.take(10ms), std::runtime_error);
}

TEST_CASE("ForkedChild reports exit codes, signals and a child still running", "[support]") {
  CHECK(ForkedChild([] { return 7; }).join() == 7);
  CHECK(ForkedChild([]() -> int { throw std::runtime_error("thrown on purpose"); }).join() == 1);
  ForkedChild killed([] {
    ::pause();
    return 0;
  });
  ::kill(killed.pid(), SIGTERM);
  CHECK(killed.join() == -SIGTERM);
  SyncPipe never;
  ForkedChild stuck([&never] { return static_cast<int>(never.take(60s)); });
  CHECK_THROWS_AS(stuck.join(50ms), std::runtime_error);
}  // `stuck` is killed and reaped here

TEST_CASE("wait_for_exit sees a process end, child or not", "[support]") {
  SyncPipe release, grandchild_pid;
  ForkedChild parent([&] {
    // A grandchild of the test: not our child, so only a pidfd (not waitpid) can wait for it.
    ForkedChild grandchild([&release] { return static_cast<int>(release.take(60s)); });
    grandchild_pid.post(static_cast<std::uint64_t>(grandchild.pid()));
    return grandchild.join(60s);
  });
  const auto pid = static_cast<pid_t>(grandchild_pid.take(10s));
  CHECK_FALSE(wait_for_exit(pid, 50ms));
  release.post(3);
  CHECK(wait_for_exit(pid, 10s));
  CHECK(parent.join() == 3);
  CHECK(wait_for_exit(pid, 0ms));  // reaped and gone
}

TEST_CASE("wait_until_blocked tells a condition wait from a mutex, a poll and running",
          "[support]") {
  SECTION("a condition variable's wait") {
    std::mutex mutex;
    std::condition_variable changed;
    bool go = false;
    std::promise<pid_t> id;
    std::thread waiter([&] {
      id.set_value(current_thread_id());
      std::unique_lock lock(mutex);
      changed.wait(lock, [&] { return go; });
    });
    const pid_t tid = id.get_future().get();
    CHECK(wait_until_blocked(tid, BlockedIn::ConditionVariable, 10s));
    CHECK(wait_until_blocked(tid, BlockedIn::ConditionVariableWithoutTimeout, 10s));
    CHECK_FALSE(wait_until_blocked(tid, BlockedIn::FileDescriptor, 20ms));
    {
      std::lock_guard lock(mutex);
      go = true;
    }
    changed.notify_all();
    waiter.join();
  }
  SECTION("a condition variable's timed wait, found by the thread's name") {
    std::mutex mutex;
    std::condition_variable changed;
    bool go = false;
    std::promise<void> named;
    std::thread waiter([&] {
      ::pthread_setname_np(::pthread_self(), "timed-waiter");
      named.set_value();
      std::unique_lock lock(mutex);
      while (!go) changed.wait_for(lock, 1h);
    });
    named.get_future().get();
    const std::optional<pid_t> tid = find_thread("timed-waiter");
    REQUIRE(tid);
    CHECK(*tid != current_thread_id());
    CHECK(wait_until_blocked(*tid, BlockedIn::ConditionVariable, 10s));
    CHECK_FALSE(wait_until_blocked(*tid, BlockedIn::ConditionVariableWithoutTimeout, 50ms));
    CHECK_FALSE(find_thread("no-such-thread"));
    {
      std::lock_guard lock(mutex);
      go = true;
    }
    changed.notify_all();
    waiter.join();
  }
  SECTION("a contended mutex is not a condition wait") {
    std::mutex mutex;
    std::unique_lock held(mutex);
    std::promise<pid_t> id;
    std::thread locker([&] {
      id.set_value(current_thread_id());
      const std::lock_guard lock(mutex);
    });
    CHECK_FALSE(wait_until_blocked(id.get_future().get(), BlockedIn::ConditionVariable, 50ms));
    held.unlock();
    locker.join();
  }
  SECTION("a poll") {
    int fds[2];
    REQUIRE(::pipe(fds) == 0);
    std::promise<pid_t> id;
    std::thread poller([&] {
      id.set_value(current_thread_id());
      pollfd pfd{fds[0], POLLIN, 0};
      ::poll(&pfd, 1, -1);
    });
    const pid_t tid = id.get_future().get();
    CHECK(wait_until_blocked(tid, BlockedIn::FileDescriptor, 10s));
    CHECK_FALSE(wait_until_blocked(tid, BlockedIn::ConditionVariable, 20ms));
    REQUIRE(::write(fds[1], "x", 1) == 1);
    poller.join();
    ::close(fds[0]);
    ::close(fds[1]);
  }
  SECTION("a running thread is blocked in nothing") {
    std::atomic<bool> stop{false};
    std::promise<pid_t> id;
    std::thread spinner([&] {
      id.set_value(current_thread_id());
      while (!stop.load()) {
      }
    });
    const pid_t tid = id.get_future().get();
    CHECK_FALSE(wait_until_blocked(tid, BlockedIn::ConditionVariable, 20ms));
    CHECK_FALSE(wait_until_blocked(tid, BlockedIn::FileDescriptor, 20ms));
    stop = true;
    spinner.join();
  }
}
