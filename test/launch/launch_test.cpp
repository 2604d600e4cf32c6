// cohort::launch() with real forked processes and a real TCP store: every rank runs, sees its
// own placement, reaches the store; failures and timeouts come back as the right Error.

#include <cohort/error.hpp>
#include <cohort/launch.hpp>
#include <cohort/store.hpp>

#include <catch2/catch.hpp>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>

#include <unistd.h>

namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

// A fresh directory per test for files the children leave behind (the parent's evidence that
// each rank ran, since a child's memory dies with it).
class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "cohort-launch-test-XXXXXX").string();
    if (!::mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

void expect(bool condition, const std::string& what) {
  if (!condition) throw std::runtime_error("check failed in child: " + what);
}

std::string env_or_empty(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

cohort::LaunchOptions bounded(std::chrono::milliseconds timeout = 60s) {
  cohort::LaunchOptions options;
  options.grace = 2s;
  options.timeout = timeout;
  return options;
}

}  // namespace

TEST_CASE("launch runs every rank with its placement, variables and a working store", "[launch]") {
  const int world_size = GENERATE(1, 2, 3, 5);
  CAPTURE(world_size);
  TempDir dir;

  cohort::launch(
      world_size,
      [&](const cohort::Environment& env) {
        expect(env.world_size == world_size, "world_size");
        expect(env.rank >= 0 && env.rank < world_size, "rank in range");
        expect(env.local_rank == env.rank && env.local_world_size == world_size, "local");
        expect(env.node_rank == 0 && env.num_nodes == 1, "single node");
        expect(env_or_empty("COHORT_RANK") == std::to_string(env.rank), "COHORT_RANK");
        expect(env_or_empty("RANK") == std::to_string(env.rank), "RANK");
        expect(env_or_empty("COHORT_WORLD_SIZE") == std::to_string(world_size), "WORLD_SIZE");
        expect(env_or_empty("COHORT_STORE_PORT") == std::to_string(env.store_port), "PORT");
        expect(env_or_empty("COHORT_TOKEN") == env.token && env.token.size() == 32, "TOKEN");

        // What cohort::init() would resolve from the exported variables matches fn's env.
        const cohort::Environment resolved = cohort::resolve_environment();
        expect(resolved.rank == env.rank && resolved.world_size == env.world_size, "resolved rank");
        expect(resolved.local_rank == env.local_rank && resolved.node_rank == 0, "resolved local");
        expect(resolved.store_addr == env.store_addr && resolved.store_port == env.store_port,
               "resolved store");
        expect(resolved.token == env.token && !resolved.host_store, "resolved token");
        expect(resolved.source == cohort::LaunchSource::Cohort, "resolved source");

        // Every rank counts itself in the parent's store and waits for the others: this only
        // completes if all world_size children run at the same time against one store.
        cohort::TcpStoreOptions options;
        options.host = env.store_addr;
        options.port = env.store_port;
        options.token = env.token;
        cohort::TcpStore store(options);
        store.add("arrived", 1);
        store.set_string("rank/" + std::to_string(env.rank), std::to_string(::getpid()));
        std::vector<std::string> keys;
        for (int r = 0; r < world_size; ++r) keys.push_back("rank/" + std::to_string(r));
        store.wait(keys, 30s);
        expect(store.add("arrived", 0) == world_size, "arrival count");

        std::ofstream(dir.path() / ("rank" + std::to_string(env.rank)))
            << env.rank << ' ' << env.world_size << ' ' << ::getpid();
        std::printf("hello from rank %d\n", env.rank);
      },
      bounded());

  for (int r = 0; r < world_size; ++r) {
    const std::string text = read_file(dir.path() / ("rank" + std::to_string(r)));
    std::istringstream fields(text);
    int rank = -1, size = -1;
    long pid = -1;
    fields >> rank >> size >> pid;
    CHECK(rank == r);
    CHECK(size == world_size);
    CHECK(pid != ::getpid());
  }
}

TEST_CASE("launch reports a rank that throws, with its message, and stops the others", "[launch]") {
  try {
    cohort::launch(
        3,
        [](const cohort::Environment& env) {
          if (env.rank == 1) {
            std::fprintf(stderr, "about to fail on purpose\n");
            throw std::runtime_error("deliberate failure in rank one");
          }
          // The others would run far longer than the test if nobody stopped them.
          std::this_thread::sleep_for(120s);
        },
        bounded());
    FAIL("launch returned although rank 1 threw");
  } catch (const cohort::Error& e) {
    CAPTURE(e.what());
    CHECK(e.code() == cohort::ErrorCode::RemoteError);
    const std::string message = e.message();
    CHECK(message.find("rank 1 of 3") != std::string::npos);
    CHECK(message.find("exit code 1") != std::string::npos);
    CHECK(message.find("deliberate failure in rank one") != std::string::npos);
    CHECK(message.find("about to fail on purpose") != std::string::npos);
    CHECK(message.find("stopped ranks 0, 2") != std::string::npos);
  }
}

TEST_CASE("launch names the signal that killed a rank", "[launch]") {
  try {
    cohort::launch(
        2,
        [](const cohort::Environment& env) {
          if (env.rank == 0) ::raise(SIGKILL);
        },
        bounded());
    FAIL("launch returned although rank 0 was killed");
  } catch (const cohort::Error& e) {
    CAPTURE(e.what());
    CHECK(e.code() == cohort::ErrorCode::RemoteError);
    CHECK(e.message().find("rank 0 of 2") != std::string::npos);
    CHECK(e.message().find("SIGKILL") != std::string::npos);
  }
}

TEST_CASE("launch times out, naming the ranks still running", "[launch]") {
  cohort::LaunchOptions options;
  options.timeout = 300ms;
  options.grace = 200ms;
  try {
    cohort::launch(
        4,
        [](const cohort::Environment& env) {
          if (env.rank == 1 || env.rank == 3) {
            // Ignoring SIGTERM forces the SIGKILL after the grace period.
            std::signal(SIGTERM, SIG_IGN);
            std::this_thread::sleep_for(120s);
          }
        },
        options);
    FAIL("launch returned although two ranks never finished");
  } catch (const cohort::Error& e) {
    CAPTURE(e.what());
    CHECK(e.code() == cohort::ErrorCode::Timeout);
    CHECK(e.message().find("ranks still running: 1, 3") != std::string::npos);
  }
}

TEST_CASE("launch rejects bad arguments before forking", "[launch]") {
  const auto noop = [](const cohort::Environment&) {};
  try {
    cohort::launch(0, noop);
    FAIL("world size 0 accepted");
  } catch (const cohort::Error& e) {
    CHECK(e.code() == cohort::ErrorCode::InvalidArgument);
    CHECK(e.message().find("got 0") != std::string::npos);
  }
  cohort::LaunchOptions negative;
  negative.timeout = -5ms;
  CHECK_THROWS_AS(cohort::launch(2, noop, negative), cohort::Error);
  CHECK_THROWS_AS(cohort::launch(2, std::function<void(const cohort::Environment&)>{}),
                  cohort::Error);
}
