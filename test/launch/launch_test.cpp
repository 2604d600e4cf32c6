// cohort::launch() with real forked processes and a real TCP store: every rank runs, sees its
// own placement, reaches the store; failures and timeouts come back as the right Error.

#include <cohort/error.hpp>
#include <cohort/launch.hpp>
#include <cohort/store.hpp>

#include "launch/pipes.hpp"
#include "support/sync_pipe.hpp"
#include "support/temp_dir.hpp"

#include <catch2/catch.hpp>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>

namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using cohort::test::TempDir;

// Each test's children leave files in a TempDir: the parent's evidence that each rank ran, since
// a child's memory dies with it.
constexpr const char* kDirPrefix = "cohort-launch-test";

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

// One line appended with a single write() to an O_APPEND file: the kernel places each such write
// at the end atomically, so the file's line order is the order in which the writes happened,
// across processes.
void append_line(const fs::path& path, const std::string& line) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0) throw std::runtime_error("open " + path.string() + " failed");
  const std::string text = line + "\n";
  const ssize_t written = ::write(fd, text.data(), text.size());
  ::close(fd);
  if (written != static_cast<ssize_t>(text.size())) throw std::runtime_error("short append");
}

std::vector<std::string> read_lines(const fs::path& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// The rendezvous every rank of a job performs: count itself in the store and wait for the
// others. Completes only when all `world_size` ranks run against the same store.
void meet_in_store(const cohort::Environment& env) {
  cohort::TcpStoreOptions options;
  options.host = env.store_addr;
  options.port = env.store_port;
  options.token = env.token;
  cohort::TcpStore store(options);
  store.set_string("met/" + std::to_string(env.rank), std::to_string(::getpid()));
  std::vector<std::string> keys;
  for (int r = 0; r < env.world_size; ++r) keys.push_back("met/" + std::to_string(r));
  store.wait(keys, 30s);
}

}  // namespace

TEST_CASE("launch runs every rank with its placement, variables and a working store", "[launch]") {
  const int world_size = GENERATE(1, 2, 3, 5);
  CAPTURE(world_size);
  TempDir dir(kDirPrefix);

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
        // torch.distributed's rank 0 binds MASTER_PORT: never the port cohort's store holds.
        expect(env_or_empty("MASTER_ADDR") == env.store_addr, "MASTER_ADDR");
        expect(!env_or_empty("MASTER_PORT").empty() &&
                   env_or_empty("MASTER_PORT") != std::to_string(env.store_port),
               "MASTER_PORT");

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
            << env.rank << ' ' << env.world_size << ' ' << ::getpid() << ' '
            << env_or_empty("MASTER_PORT");
        std::printf("hello from rank %d\n", env.rank);
      },
      bounded());

  std::set<int> master_ports;
  for (int r = 0; r < world_size; ++r) {
    const std::string text = read_file(dir.path() / ("rank" + std::to_string(r)));
    std::istringstream fields(text);
    int rank = -1, size = -1, master_port = -1;
    long pid = -1;
    fields >> rank >> size >> pid >> master_port;
    CHECK(rank == r);
    CHECK(size == world_size);
    CHECK(pid != ::getpid());
    master_ports.insert(master_port);
  }
  CHECK(master_ports.size() == 1);  // every rank names the same port
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
          // The others stay until launch() stops them.
          ::pause();
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
            // Ignoring SIGTERM forces the SIGKILL after the grace period; until then it stays.
            std::signal(SIGTERM, SIG_IGN);
            ::pause();
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

TEST_CASE("a rank left behind after SIGKILL is reaped once it finally dies", "[launch]") {
  // Rank 0 is traced by a process of its own (outside its group, so the stop spares it) that
  // never waits for it: killed, rank 0 is a zombie only the tracer can hand over, so launch()
  // gives up on it 10 s after SIGKILL and returns. Once the tracer lets go, rank 0 must not stay
  // a zombie of this process.
  TempDir dir(kDirPrefix);
  const fs::path pids = dir.path() / "pids";
  cohort::test::SyncPipe attached;  // the tracer to rank 1: 1 when it holds rank 0, 2 if refused
  cohort::test::SyncPipe release;   // this process to the tracer: let go
  cohort::LaunchOptions options = bounded();
  options.grace = 100ms;
  std::string message;
  try {
    cohort::launch(
        2,
        [&](const cohort::Environment& env) {
          if (env.rank == 1) {
            const std::uint64_t note = attached.take(30s);
            if (note != 1) throw std::runtime_error("ptrace refused here");
            throw std::runtime_error("rank 1 fails once rank 0 is traced");
          }
          // Before the tracer exists: a stop signal may reach this rank from then on.
          std::ofstream(pids) << ::getpid() << "\n";
          // Yama's ptrace_scope 1 lets only ancestors trace, unless the tracee allows it.
          ::prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
          const pid_t tracer = ::fork();
          if (tracer == 0) {
            ::setsid();
            const bool held = ::ptrace(PTRACE_SEIZE, ::getppid(), nullptr, nullptr) == 0;
            attached.post(held ? 1 : 2);
            try {
              release.take(120s);
            } catch (...) {
            }
            ::_exit(0);  // the tracer's exit hands the zombie to its parent
          }
          for (;;) ::pause();
        },
        options);
    FAIL("launch returned although rank 1 threw");
  } catch (const cohort::Error& e) {
    message = e.message();
  }
  if (message.find("ptrace refused here") != std::string::npos) {
    WARN("cannot trace a process here: skipping");
    return;
  }
  CAPTURE(message);
  CHECK(message.find("rank 1 fails once rank 0 is traced") != std::string::npos);
  pid_t rank0 = 0;
  std::ifstream(pids) >> rank0;
  REQUIRE(rank0 > 0);
  // Still there: a zombie the tracer holds.
  REQUIRE(::kill(rank0, 0) == 0);
  release.post();
  // Bounded wait for the reap (nothing announces it to this process): gone means reaped.
  const auto until = std::chrono::steady_clock::now() + 20s;
  while (::kill(rank0, 0) == 0 && std::chrono::steady_clock::now() < until) ::usleep(10'000);
  const int gone = ::kill(rank0, 0);
  const int why = errno;  // read before any assertion's own calls can change it
  CHECK(gone == -1);
  CHECK(why == ESRCH);
}

TEST_CASE("writing the port to a rank that already died does not kill the caller", "[launch]") {
  // launch() tells each child its store port through a pipe. A child that died first has closed
  // the pipe's far end, and a plain write() then raises SIGPIPE, whose default action would kill
  // the application that called launch(). Checked in a child process with that default action.
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::signal(SIGPIPE, SIG_DFL);
    int fds[2];
    if (::pipe(fds) != 0) ::_exit(3);
    ::close(fds[0]);  // the reader is gone
    const bool written = cohort::launcher::write_all_quietly(fds[1], "1234\n", 5);
    const int error = errno;
    // Still alive: the SIGPIPE was blocked and taken back, or restoring the mask delivers it.
    ::_exit(written ? 1 : error == EPIPE ? 0 : 2);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  INFO("status " << status);
  REQUIRE_FALSE(WIFSIGNALED(status));
  CHECK(WEXITSTATUS(status) == 0);
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

TEST_CASE("launch places ranks on nodes of local_world_size and runs setup before fn", "[launch]") {
  TempDir dir(kDirPrefix);
  const fs::path log = dir.path() / "events";
  cohort::LaunchOptions options = bounded();
  options.local_world_size = 2;
  options.setup = [&](const cohort::Environment& env) {
    expect(env.local_rank == env.rank % 2, "setup sees the local rank");
    // The variables cohort::init() reads are already exported when setup runs.
    expect(env_or_empty("COHORT_LOCAL_RANK") == std::to_string(env.local_rank), "setup env");
    append_line(log, "setup " + std::to_string(env.rank) + " " + std::to_string(::getpid()));
  };

  cohort::launch(
      4,
      [&](const cohort::Environment& env) {
        append_line(log, "init " + std::to_string(env.rank) + " " + std::to_string(::getpid()));
        const cohort::Environment resolved = cohort::resolve_environment();
        expect(resolved.local_rank == env.local_rank && resolved.node_rank == env.node_rank,
               "resolved placement");
        expect(resolved.local_world_size == 2 && resolved.num_nodes == 2, "resolved nodes");
        meet_in_store(env);
        std::ofstream(dir.path() / ("rank" + std::to_string(env.rank)))
            << env.local_rank << ' ' << env.local_world_size << ' ' << env.node_rank << ' '
            << env.num_nodes << ' ' << env.world_size;
      },
      options);

  // Placement, as ml-starter computes it: local rank = rank % 2, node = rank / 2.
  const char* expected[] = {"0 2 0 2 4", "1 2 0 2 4", "0 2 1 2 4", "1 2 1 2 4"};
  for (int r = 0; r < 4; ++r) {
    CAPTURE(r);
    CHECK(read_file(dir.path() / ("rank" + std::to_string(r))) == expected[r]);
  }

  // setup ran four times, once per rank, in the rank's own process, before that rank's fn.
  const std::vector<std::string> lines = read_lines(log);
  CAPTURE(lines);
  REQUIRE(lines.size() == 8);
  for (int r = 0; r < 4; ++r) {
    CAPTURE(r);
    int setup_at = -1, init_at = -1, setups = 0;
    std::string setup_pid, init_pid;
    for (int i = 0; i < static_cast<int>(lines.size()); ++i) {
      std::istringstream fields(lines[static_cast<std::size_t>(i)]);
      std::string event, pid;
      int rank = -1;
      fields >> event >> rank >> pid;
      if (rank != r) continue;
      if (event == "setup") {
        ++setups;
        setup_at = i;
        setup_pid = pid;
      } else if (event == "init") {
        init_at = i;
        init_pid = pid;
      }
    }
    CHECK(setups == 1);
    CHECK(setup_at >= 0);
    CHECK(init_at > setup_at);
    CHECK(setup_pid == init_pid);
    CHECK(setup_pid != std::to_string(::getpid()));
  }
}

TEST_CASE("launch with a rank_offset starts part of a job another launch shares", "[launch]") {
  // Two launches form one job of 4 ranks on 2 nodes, as two machines would: the outer launch
  // hosts the store and its 2 children each start one node's ranks with an offset. The inner
  // ranks can only meet in the store if the offsets tile 0..3 and they all share that store.
  TempDir dir(kDirPrefix);
  cohort::launch(
      2,
      [&](const cohort::Environment& outer) {
        cohort::LaunchOptions inner = bounded();
        inner.rank_offset = 2 * outer.rank;
        inner.local_world_size = 2;
        inner.join = cohort::JoinedJob{4, outer.store_addr, outer.store_port, outer.token};
        cohort::launch(
            2,
            [&](const cohort::Environment& env) {
              expect(env.world_size == 4, "the joined job's world size");
              expect(env.rank / 2 == outer.rank, "rank within this node's offset");
              expect(env.local_rank == env.rank % 2 && env.node_rank == outer.rank, "placement");
              expect(env_or_empty("COHORT_RANK") == std::to_string(env.rank), "COHORT_RANK");
              expect(env.store_port == outer.store_port, "the joined store");
              // Each launch of a joined job derives the same MASTER_PORT: the store's plus one.
              expect(env_or_empty("MASTER_PORT") == std::to_string(outer.store_port + 1),
                     "MASTER_PORT");
              meet_in_store(env);
              std::ofstream(dir.path() / ("rank" + std::to_string(env.rank)))
                  << env.rank << ' ' << env.local_rank << ' ' << env.node_rank;
            },
            inner);
      },
      bounded());

  const char* expected[] = {"0 0 0", "1 1 0", "2 0 1", "3 1 1"};
  for (int r = 0; r < 4; ++r) {
    CAPTURE(r);
    CHECK(read_file(dir.path() / ("rank" + std::to_string(r))) == expected[r]);
  }
}

TEST_CASE("launch reports a throwing setup naming its rank; that rank's fn never runs",
          "[launch]") {
  TempDir dir(kDirPrefix);
  cohort::LaunchOptions options = bounded();
  options.setup = [](const cohort::Environment& env) {
    if (env.rank == 2) throw std::runtime_error("no device for this rank");
  };
  try {
    cohort::launch(
        4,
        [&](const cohort::Environment& env) {
          std::ofstream(dir.path() / ("fn" + std::to_string(env.rank))) << "ran";
          // The others wait to be stopped: launch() must end them once rank 2 failed.
          ::pause();
        },
        options);
    FAIL("launch returned although rank 2's setup threw");
  } catch (const cohort::Error& e) {
    CAPTURE(e.what());
    CHECK(e.code() == cohort::ErrorCode::RemoteError);
    CHECK(e.message().find("rank 2 of 4") != std::string::npos);
    CHECK(e.message().find("rank 2: setup failed: no device for this rank") != std::string::npos);
  }
  CHECK_FALSE(fs::exists(dir.path() / "fn2"));
}

TEST_CASE("launch rejects inconsistent rank offsets and node sizes before forking", "[launch]") {
  const auto noop = [](const cohort::Environment&) {};
  const auto rejects = [&](int num_ranks, const cohort::LaunchOptions& options,
                           const std::string& needle) {
    try {
      cohort::launch(num_ranks, noop, options);
      FAIL("accepted; expected a message with: " << needle);
    } catch (const cohort::Error& e) {
      CAPTURE(e.what());
      CHECK(e.code() == cohort::ErrorCode::InvalidArgument);
      CHECK(e.message().find(needle) != std::string::npos);
    }
  };
  cohort::LaunchOptions options;
  options.rank_offset = 2;
  rejects(2, options, "rank_offset 2 needs options.join");
  options.join = cohort::JoinedJob{3, "127.0.0.1", 1234, "token"};
  rejects(2, options, "ranks 2..3 do not fit in the joined job of 3 ranks");
  options.join = cohort::JoinedJob{4, "", 0, "token"};
  rejects(2, options, "store is not set");
  options = {};
  options.rank_offset = -1;
  rejects(2, options, "rank_offset must not be negative, got -1");
  options = {};
  options.local_world_size = 3;
  rejects(2, options, "local_world_size 3 is larger than the job's 2 ranks");
  options.local_world_size = -2;
  rejects(2, options, "local_world_size must not be negative, got -2");
  // Deadlines past a year would overflow now + the duration.
  options = {};
  options.timeout = cohort::kMaxTimeout + std::chrono::milliseconds(1);
  rejects(2, options, "timeout must be between 0 and one year");
  options = {};
  options.grace = std::chrono::milliseconds(-1);
  rejects(2, options, "grace must be between 0 and one year, got -1 ms");
}
