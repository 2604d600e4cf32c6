// connect_store() with forked ranks: the file rendezvous (fresh, and over stale files left by an
// earlier job), rank 0 hosting at a known address, a launcher-hosted store, a world of one, and
// the deadline when rank 0 never shows up.

#include <cohort/environment.hpp>
#include <cohort/error.hpp>
#include <cohort/store.hpp>

#include "bootstrap/socket.hpp"
#include "core/log_sink.hpp"
#include "support/forked_child.hpp"
#include "support/scoped_env.hpp"
#include "support/sync_pipe.hpp"
#include "support/temp_dir.hpp"

#include <spdlog/sinks/base_sink.h>
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string_view>

using namespace cohort;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

// A private COHORT_RENDEZVOUS_DIR for one test case, removed afterwards.
class RendezvousDir {
 public:
  fs::path file_for(const std::string& job) const {
    return dir_.path() / ("cohort-" + job + ".addr");
  }

 private:
  test::TempDir dir_{"cohort-rdv"};
  test::ScopedEnv variable_{"COHORT_RENDEZVOUS_DIR", dir_.path().string()};
};

std::string unique_job(const std::string& name) {
  return name + "-" + std::to_string(::getpid()) + "-" +
         std::to_string(Clock::now().time_since_epoch().count());
}

Environment rank_env(int rank, int world, const std::string& job) {
  Environment env;
  env.rank = rank;
  env.world_size = world;
  env.local_rank = rank;
  env.local_world_size = world;
  env.job_id = job;
  env.source = LaunchSource::Config;
  return env;
}

// The stale-file tests need rank 0 to arrive only after every other rank has read the stale file
// and given up on the store it names. Such a rank says so in a debug line of cohort's log ending
// in "waiting for rank 0" (lib/bootstrap/rendezvous.cpp, join_published); this sink, added in
// the rank's own process, turns the first such line into a note on a pipe, and rank 0 takes one
// note per other rank before it connects.
class RefusalNotes final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  RefusalNotes(test::SyncPipe& pipe, int rank) : pipe_(pipe), rank_(rank) {}

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    const std::string_view text(msg.payload.data(), msg.payload.size());
    if (noted_ || text.find("waiting for rank 0") == std::string_view::npos) return;
    noted_ = true;
    pipe_.post(static_cast<std::uint64_t>(rank_));
  }
  void flush_() override {}

 private:
  test::SyncPipe& pipe_;
  const int rank_;
  bool noted_ = false;
};

// In a rank's process: log debug lines to the RefusalNotes sink only (stderr keeps its level).
void note_refusals(test::SyncPipe& pipe, int rank) {
  spdlog::logger& logger = log::logger();
  for (const auto& sink : logger.sinks()) sink->set_level(logger.level());
  logger.sinks().push_back(std::make_shared<RefusalNotes>(pipe, rank));
  logger.set_level(spdlog::level::debug);
}

// What every rank does once connected: publish itself, wait for all, add to a shared sum; rank 0
// keeps its server up until every other rank has finished, then checks the sum. With `refusals`,
// rank 0 connects only after every other rank has refused the store a stale file names.
int exchange_as_rank(const Environment& env, test::SyncPipe* refusals) {
  if (refusals && env.rank == 0) {
    for (int r = 1; r < env.world_size; ++r) refusals->take(30s);
  } else if (refusals) {
    note_refusals(*refusals, env.rank);
  }
  auto store = connect_store(env);
  store->set_string("rank/" + std::to_string(env.rank), std::to_string(::getpid()));
  std::vector<std::string> all, others_done;
  for (int r = 0; r < env.world_size; ++r) {
    all.push_back("rank/" + std::to_string(r));
    if (r != 0) others_done.push_back("done/" + std::to_string(r));
  }
  store->wait(all, 20s);
  store->add("sum", env.rank + 1);
  if (env.rank != 0) {
    store->set_string("done/" + std::to_string(env.rank), "1");
    return 0;
  }
  store->wait(others_done, 20s);
  const std::int64_t expected = std::int64_t{env.world_size} * (env.world_size + 1) / 2;
  return store->add("sum", 0) == expected ? 0 : 4;
}

int run_world(int world, const std::function<Environment(int)>& env_for,
              test::SyncPipe* refusals = nullptr) {
  std::vector<test::ForkedChild> ranks;
  for (int r = 0; r < world; ++r)
    ranks.emplace_back([&, r] { return exchange_as_rank(env_for(r), refusals); });
  int failures = 0;
  for (int r = 0; r < world; ++r) {
    const int code = ranks[r].join();
    if (code != 0) {
      UNSCOPED_INFO("rank " << r << " exited with " << code);
      ++failures;
    }
  }
  return failures;
}

std::uint16_t free_port() {
  TcpStoreServer probe(TcpStoreOptions{});
  return probe.port();
}

}  // namespace

TEST_CASE("file rendezvous joins forked ranks and removes its file", "[rendezvous][multiproc]") {
  const int world = GENERATE(2, 3, 5);
  INFO("world " << world);
  RendezvousDir dir;
  const std::string job = unique_job("fresh");
  CHECK(run_world(world, [&](int r) { return rank_env(r, world, job); }) == 0);
  CHECK_FALSE(fs::exists(dir.file_for(job)));
}

TEST_CASE("a stale file naming a dead port does not break the rendezvous",
          "[rendezvous][multiproc]") {
  RendezvousDir dir;
  const std::string job = unique_job("stale-dead");
  std::ofstream(dir.file_for(job)) << "127.0.0.1\n" << free_port() << "\nold-token\n";
  // Rank 0 arrives only once the others have read the stale file and found its port dead.
  test::SyncPipe refusals;
  CHECK(run_world(
            3, [&](int r) { return rank_env(r, 3, job); }, &refusals) == 0);
  CHECK_FALSE(fs::exists(dir.file_for(job)));
}

TEST_CASE("a stale file naming a live server of an earlier job does not break the rendezvous",
          "[rendezvous][multiproc]") {
  RendezvousDir dir;
  const std::string job = unique_job("stale-live");
  // The earlier job: its ranks joined, then rank 0 hung with its server (and file) alive.
  test::ForkedChild old_rank0([&] {
    auto store = connect_store(rank_env(0, 3, job));
    store->wait({"old/1", "old/2"}, 20s);
    ::pause();  // hung with its server (and file) alive, until the test kills it
    return 0;
  });
  for (int r = 1; r < 3; ++r) {
    test::ForkedChild old_rank([&, r] {
      auto store = connect_store(rank_env(r, 3, job));
      store->set_string("old/" + std::to_string(r), "joined");
      return 0;
    });
    REQUIRE(old_rank.join() == 0);
  }
  REQUIRE(fs::exists(dir.file_for(job)));
  // The new job with the same id; its rank 0 arrives only once the others have read the stale
  // file and found their slots in the old store taken.
  test::SyncPipe refusals;
  CHECK(run_world(
            3, [&](int r) { return rank_env(r, 3, job); }, &refusals) == 0);
}

TEST_CASE("rank 0 hosts the store at a known address when nobody else does",
          "[rendezvous][multiproc]") {
  RendezvousDir dir;  // must stay unused
  const std::uint16_t port = free_port();
  const std::string job = unique_job("hosted");
  CHECK(run_world(3, [&](int r) {
          Environment env = rank_env(r, 3, job);
          env.store_addr = "127.0.0.1";
          env.store_port = port;
          env.token = "known-address";
          env.host_store = true;
          return env;
        }) == 0);
  CHECK_FALSE(fs::exists(dir.file_for(job)));
}

TEST_CASE("a launcher-hosted store is joined, not hosted", "[rendezvous][unit]") {
  TcpStoreServer launcher(TcpStoreOptions{.token = "launcher"});
  Environment env = rank_env(1, 2, "unused");
  env.store_addr = launcher.host();
  env.store_port = launcher.port();
  env.token = "launcher";
  auto store = connect_store(env);
  store->set_string("from-rank-1", "hi");
  TcpStore observer(TcpStoreOptions{.port = launcher.port(), .token = "launcher"});
  CHECK(observer.get_string("from-rank-1", 1s) == "hi");
}

TEST_CASE("a world of one gets an in-process store", "[rendezvous][unit]") {
  Environment env;
  auto store = connect_store(env);
  store->set_string("solo", "1");
  CHECK(store->get_string("solo", 0ms) == "1");
  CHECK(store->add("n", 2) == 2);
}

TEST_CASE("connect_store refuses what it cannot do, naming why", "[rendezvous][unit]") {
  RendezvousDir dir;
  SECTION("rank outside the world") {
    Environment env = rank_env(3, 3, "x");
    try {
      connect_store(env);
      FAIL("connect_store accepted rank 3 of 3");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::InvalidArgument);
      CHECK_THAT(e.message(), Catch::Contains("rank 3"));
    }
  }
  SECTION("several nodes and no job id") {
    Environment env = rank_env(1, 4, "");
    env.num_nodes = 2;
    env.local_world_size = 2;
    try {
      connect_store(env);
      FAIL("connect_store guessed a job id across nodes");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::InvalidArgument);
      CHECK_THAT(e.message(), Catch::Contains("COHORT_JOB_ID"));
    }
  }
  SECTION("several nodes and no directory they all see") {
    // The temp directory is each node's own: refused at once, not a wait for a file that never
    // appears on this node.
    const test::ScopedEnv no_dir("COHORT_RENDEZVOUS_DIR", std::nullopt);
    const test::ScopedEnv store_timeout("COHORT_STORE_TIMEOUT", "2");
    Environment env = rank_env(1, 4, unique_job("nodes"));
    env.num_nodes = 2;
    env.local_world_size = 2;
    try {
      connect_store(env);
      FAIL("connect_store waited for a file in a node's own temp directory");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::InvalidArgument);
      CHECK_THAT(e.message(), Catch::Contains("COHORT_RENDEZVOUS_DIR"));
      CHECK_THAT(e.message(), Catch::Contains("2-node"));
    }
  }
  SECTION("a file of another user's in a directory open to all is refused, not followed") {
    // Another user could put the file in a shared temp directory first, naming their store.
    const std::string job = unique_job("foreign");
    REQUIRE(::chmod(dir.file_for(job).parent_path().c_str(), 01777) == 0);  // as /tmp is
    std::ofstream(dir.file_for(job)) << "127.0.0.1\n" << free_port() << "\ntheirs\n";
    const uid_t other = ::geteuid() == 65534 ? 65533 : 65534;
    if (::chown(dir.file_for(job).c_str(), other, static_cast<gid_t>(-1)) != 0) {
      WARN("cannot give the file to another user (not root): section not run");
      return;
    }
    const test::ScopedEnv store_timeout("COHORT_STORE_TIMEOUT", "2");
    try {
      connect_store(rank_env(1, 3, job));
      FAIL("connect_store used a file another user owns");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::InvalidArgument);
      CHECK_THAT(e.message(), Catch::Contains(dir.file_for(job).string()));
      CHECK_THAT(e.message(), Catch::Contains("uid " + std::to_string(other)));
    }
  }
  SECTION("rank 0 never publishes: Timeout naming the file") {
    const test::ScopedEnv store_timeout("COHORT_STORE_TIMEOUT", "0.2");
    const std::string job = unique_job("lonely");
    try {
      connect_store(rank_env(1, 3, job));
      FAIL("connect_store returned without rank 0");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::Timeout);
      CHECK_THAT(e.message(), Catch::Contains(dir.file_for(job).string()));
    }
  }
  SECTION("the file names a listener that never answers: Timeout at the store timeout") {
    // Each attempt on it connects (the kernel's backlog accepts) and waits for a handshake that
    // never comes; no attempt may run past the store timeout.
    const UniqueFd silent = bootstrap::listen_on("127.0.0.1", 0);
    sockaddr_in address{};
    socklen_t length = sizeof address;
    REQUIRE(::getsockname(silent.get(), reinterpret_cast<sockaddr*>(&address), &length) == 0);
    const std::string job = unique_job("silent");
    std::ofstream(dir.file_for(job)) << "127.0.0.1\n" << ntohs(address.sin_port) << "\ntoken\n";
    const test::ScopedEnv store_timeout("COHORT_STORE_TIMEOUT", "1.5");
    const auto start = Clock::now();
    try {
      connect_store(rank_env(1, 3, job));
      FAIL("connect_store returned without rank 0");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::Timeout);
      CHECK_THAT(e.message(), Catch::Contains("handshake"));
    }
    // Before, the last attempt's handshake had 5 s of its own whatever was left.
    CHECK(std::chrono::duration<double>(Clock::now() - start).count() < 1.5 + 2.0);
  }
}
