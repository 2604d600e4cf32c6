// cohort-run driven as a user would: real processes, real store, real signals. Every test also
// checks that the launcher left nothing behind (this process is a child subreaper, so orphans
// and zombies of the launcher would become ours). A rank that must stay until the launcher stops
// it runs `sleep infinity`; one that must wait for another rank reads a FIFO, never a timed sleep.

#include "command_runner.hpp"

#include "support/process_stop.hpp"
#include "support/temp_dir.hpp"

#include <catch2/catch.hpp>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include <fcntl.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

namespace {

using cohort::test::CommandResult;
using cohort::test::run_command;
using cohort::test::RunningCommand;
using cohort::test::stop_process;
using cohort::test::TempDir;
using namespace std::chrono_literals;

std::vector<std::string> cohort_run(std::vector<std::string> args) {
  args.insert(args.begin(), cohort::test::cohort_run_path());
  return args;
}

void check_nothing_left_behind() {
  const std::vector<pid_t> leftovers = cohort::test::leftover_descendants(2s);
  CAPTURE(leftovers);
  CHECK(leftovers.empty());
}

// "[rank N] KEY=VALUE" lines of `env` output, by rank.
std::map<int, std::map<std::string, std::string>> variables_by_rank(const std::string& out) {
  std::map<int, std::map<std::string, std::string>> result;
  static const std::regex line_re(R"(^\[rank (\d+)\] ([A-Za-z_][A-Za-z0-9_]*)=(.*)$)");
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (std::regex_match(line, m, line_re)) result[std::stoi(m[1])][m[2]] = m[3];
  }
  return result;
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// A FIFO named `name` in `dir`; its path, which has no characters a shell would interpret.
std::string make_fifo(const TempDir& dir, const std::string& name) {
  const std::string path = (dir.path() / name).string();
  REQUIRE(::mkfifo(path.c_str(), 0600) == 0);
  return path;
}

// Writes "go" to the FIFO at `path`, whose reader (a rank holding it open) waits for it.
void write_go(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_NONBLOCK);
  REQUIRE(fd >= 0);
  REQUIRE(::write(fd, "go\n", 3) == 3);
  ::close(fd);
}

struct Subreaper {
  Subreaper() { cohort::test::become_subreaper(); }
} const subreaper;

}  // namespace

TEST_CASE("cohort-run exports placement and store variables to every rank", "[cohort-run]") {
  const CommandResult r =
      run_command(cohort_run({"-n", "4", "--env", "EXTRA_VAR=a=b", "--", "env"}));
  CAPTURE(r.out, r.err);
  REQUIRE(r.exit_code == 0);
  const auto vars = variables_by_rank(r.out);
  REQUIRE(vars.size() == 4);
  const std::string port = vars.at(0).at("COHORT_STORE_PORT");
  const std::string token = vars.at(0).at("COHORT_TOKEN");
  CHECK(std::stoi(port) > 0);
  // A port of torch.distributed's own, not the one cohort's store holds (torch's rank 0 binds
  // it: the store's made init_process_group fail).
  CHECK(std::stoi(vars.at(0).at("MASTER_PORT")) > 0);
  CHECK(vars.at(0).at("MASTER_PORT") != port);
  CHECK(std::regex_match(token, std::regex("[0-9a-f]{32}")));
  for (int rank = 0; rank < 4; ++rank) {
    CAPTURE(rank);
    const auto& v = vars.at(rank);
    const std::map<std::string, std::string> expected{
        {"COHORT_RANK", std::to_string(rank)},
        {"COHORT_WORLD_SIZE", "4"},
        {"COHORT_LOCAL_RANK", std::to_string(rank)},
        {"COHORT_LOCAL_WORLD_SIZE", "4"},
        {"COHORT_NODE_RANK", "0"},
        {"COHORT_NNODES", "1"},
        {"COHORT_STORE_ADDR", "127.0.0.1"},
        {"COHORT_STORE_PORT", port},
        {"COHORT_TOKEN", token},
        {"RANK", std::to_string(rank)},
        {"WORLD_SIZE", "4"},
        {"LOCAL_RANK", std::to_string(rank)},
        {"LOCAL_WORLD_SIZE", "4"},
        {"GROUP_RANK", "0"},
        {"MASTER_ADDR", "127.0.0.1"},
        {"MASTER_PORT", vars.at(0).at("MASTER_PORT")},
        {"EXTRA_VAR", "a=b"},
    };
    for (const auto& [key, value] : expected) {
      CAPTURE(key);
      REQUIRE(v.count(key) == 1);
      CHECK(v.at(key) == value);
    }
  }
  check_nothing_left_behind();
}

TEST_CASE("cohort-run --master-port 65535 gives torch the port before it", "[cohort-run]") {
  // The store holds the last port, which has no next: MASTER_PORT is the one before it (every
  // node derives the same). Before, no MASTER_ADDR or MASTER_PORT was exported at all.
  const CommandResult r = run_command(
      cohort_run({"-n", "2", "--master-port", "65535", "--", "sh", "-c",
                  "echo ports $COHORT_STORE_PORT ${MASTER_ADDR:-none} ${MASTER_PORT:-none}"}));
  CAPTURE(r.out, r.err);
  if (r.exit_code != 0 && contains(r.err, "in use")) {
    WARN("port 65535 is taken on this host; not tested");
    return;
  }
  REQUIRE(r.exit_code == 0);
  CHECK(contains(r.out, "[rank 0] ports 65535 127.0.0.1 65534\n"));
  CHECK(contains(r.out, "[rank 1] ports 65535 127.0.0.1 65534\n"));
}

TEST_CASE("cohort-run uses COHORT_TOKEN when set, and a fresh one with --standalone",
          "[cohort-run]") {
  const std::map<std::string, std::string> env{{"COHORT_TOKEN", "caller-chosen-secret"}};
  const CommandResult given = run_command(cohort_run({"-n", "2", "env"}), env);
  REQUIRE(given.exit_code == 0);
  for (const auto& [rank, v] : variables_by_rank(given.out)) {
    CHECK(v.at("COHORT_TOKEN") == "caller-chosen-secret");
  }
  const CommandResult fresh = run_command(cohort_run({"--standalone", "-n", "2", "env"}), env);
  REQUIRE(fresh.exit_code == 0);
  const auto vars = variables_by_rank(fresh.out);
  REQUIRE(vars.size() == 2);
  CHECK(vars.at(0).at("COHORT_TOKEN") != "caller-chosen-secret");
  CHECK(vars.at(0).at("COHORT_TOKEN") == vars.at(1).at("COHORT_TOKEN"));
  check_nothing_left_behind();
}

TEST_CASE("cohort-run exits with the failing rank's code and names it", "[cohort-run]") {
  const CommandResult r = run_command(
      cohort_run({"-n", "3", "--", "sh", "-c",
                  "if [ $COHORT_RANK = 1 ]; then echo rank one gives up >&2; exit 7; fi; "
                  "sleep infinity"}));
  CAPTURE(r.out, r.err);
  CHECK(r.exit_code == 7);
  CHECK(contains(r.err, "first failure: rank 1 of 3 (local rank 1, node 0, pid "));
  CHECK(contains(r.err, "failed with exit code 7"));
  CHECK(contains(r.err, "stopped ranks on node 0: 0, 2"));
  CHECK(contains(r.err, "    rank one gives up"));
  // Exactly one summary.
  CHECK(r.err.find("job failed") == r.err.rfind("job failed"));
  check_nothing_left_behind();
}

TEST_CASE("cohort-run finishes a job whose stdout nobody reads", "[cohort-run]") {
  // cohort-run's stdout is a FIFO whose reader holds it open but never reads (an ssh session
  // whose client went to sleep): the ranks print 3 MB each, more than the FIFO and the echo's
  // queue hold, then fail. cohort-run must still see the failure and exit with its code; with
  // a blocking echo it stayed in write() and this wait ran out.
  const TempDir dir;
  const std::string fifo = make_fifo(dir, "stalled-terminal");
  RunningCommand holder({"sh", "-c", "exec sleep 120 < " + fifo});
  const std::string program = "head -c 3000000 /dev/zero | tr '\\0' x | fold -w 100; exit 3";
  const CommandResult r =
      run_command({"sh", "-c", "exec \"$0\" \"$@\" > " + fifo, cohort::test::cohort_run_path(),
                   "-n", "2", "--", "sh", "-c", program},
                  {}, 60s);
  CAPTURE(r.err);
  CHECK(r.exit_code == 3);
  CHECK(contains(r.err, "failed with exit code 3"));
  ::kill(holder.pid(), SIGKILL);
  holder.wait(10s);
  check_nothing_left_behind();
}

TEST_CASE("cohort-run's own warnings do not block on a stderr nobody reads", "[cohort-run]") {
  // cohort-run's stderr is a FIFO held open and never read, filled by rank 0's output. Rank 1
  // then fails; rank 0 catches SIGUSR1 but never writes a flight record, so the launcher warns
  // after its wait for the records. With that warning a blocking write, the launcher stayed in
  // it and this wait ran out.
  const TempDir dir;
  const std::string stalled = make_fifo(dir, "stalled-stderr");
  const std::string printed = make_fifo(dir, "printed");
  RunningCommand holder({"sh", "-c", "exec sleep 120 < " + stalled});
  const std::string program =
      "if [ $COHORT_RANK = 1 ]; then exec 3<> " + printed +
      "; read a <&3; exit 3; fi; trap 'true' USR1; "
      "head -c 300000 /dev/zero | tr '\\0' y | fold -w 100 >&2; echo done > " +
      printed + "; sleep infinity & while :; do wait $!; done";
  const CommandResult r =
      run_command({"sh", "-c", "exec \"$0\" \"$@\" 2> " + stalled, cohort::test::cohort_run_path(),
                   "-n", "2", "--grace", "1", "--", "sh", "-c", program},
                  {}, 60s);
  CAPTURE(r.out);
  CHECK(r.exit_code == 3);
  ::kill(holder.pid(), SIGKILL);
  holder.wait(10s);
  check_nothing_left_behind();
}

TEST_CASE("cohort-run leaves behind a rank that cannot be reaped after SIGKILL", "[cohort-run]") {
  // A rank stuck in the kernel (a device driver's call that never returns) dies only when the
  // call does. Stand-in: the test traces rank 0 (PTRACE_SEIZE) and never waits for it, so its
  // SIGTERM leaves it stopped and, once SIGKILL ends it, its parent cannot reap it (a traced
  // zombie goes to its tracer first). Rank 1 then fails; cohort-run must end the job without it.
  const TempDir dir;
  const std::string go = make_fifo(dir, "go");
  RunningCommand job(cohort_run({"-n", "2", "--grace", "1", "--", "sh", "-c",
                                 "if [ $COHORT_RANK = 1 ]; then exec 3<> " + go +
                                     "; echo ready; read a <&3; exit 3; fi; echo pid $$; "
                                     "exec sleep infinity"}));
  REQUIRE(job.wait_for_output("[rank 1] ready", 30s));
  REQUIRE(job.wait_for_output("[rank 0] pid ", 30s));
  std::smatch m;
  const std::string out = job.out_so_far();
  REQUIRE(std::regex_search(out, m, std::regex(R"(\[rank 0\] pid (\d+))")));
  const pid_t rank0 = static_cast<pid_t>(std::stol(m[1]));
  const bool traced = ::ptrace(PTRACE_SEIZE, rank0, nullptr, nullptr) == 0;
  const int seize_errno = errno;
  write_go(go);
  if (!traced) {
    WARN("cannot trace the rank here (errno " << seize_errno << "); not tested");
    job.wait(60s);
    check_nothing_left_behind();
    return;
  }
  {
    // Whatever the checks below find, rank 0 is killed and its traced zombie reaped here, so the
    // next test does not find it.
    // (Its launcher is gone by then, so it is ours: re-parented to this subreaper.)
    struct ReleaseTracee {
      pid_t pid;
      ~ReleaseTracee() {
        if (pid <= 0) return;
        ::kill(pid, SIGKILL);
        cohort::test::reap_orphans(1, 10s);
      }
    } release{rank0};
    // Without the bound the launcher waited for rank 0 for good and this wait ran out.
    const CommandResult r = job.wait(60s);
    CAPTURE(r.out, r.err);
    CHECK(r.exit_code == 3);
    CHECK(contains(
        r.err, "rank 0 (pid " + std::to_string(rank0) + ") did not exit within 10 s of SIGKILL"));
    CHECK(contains(r.err, "left behind, not reapable after SIGKILL: rank(s) 0"));
    // The tracer lets it go: rank 0's zombie, ours now (its launcher is gone), is reaped here.
    release.pid = 0;
    CHECK(cohort::test::reap_orphans(1, 10s) == std::vector<pid_t>{rank0});
  }  // rank 0 released: its zombie is reaped before the check below
  check_nothing_left_behind();
}

TEST_CASE("cohort-run reports a rank killed by a signal as 128+signal", "[cohort-run]") {
  const CommandResult r = run_command(
      cohort_run({"-n", "3", "--", "sh", "-c",
                  "if [ $COHORT_RANK = 2 ]; then echo segfaulting now >&2; kill -SEGV $$; fi; "
                  "sleep infinity"}));
  CAPTURE(r.out, r.err);
  CHECK(r.exit_code == 128 + SIGSEGV);
  CHECK(contains(r.err, "first failure: rank 2 of 3"));
  CHECK(contains(r.err, "SIGSEGV"));
  CHECK(contains(r.err, "segfaulting now"));
  CHECK(contains(r.err, "stopped ranks on node 0: 0, 1"));
  check_nothing_left_behind();
}

TEST_CASE("what a rank leaves in its process group is killed when the rank ends", "[cohort-run]") {
  // Killed as the rank is reaped, while its zombie still holds the group's id: once reaped,
  // the id may name an unrelated group, which a sweep at the end of the job could kill. Rank 0
  // backgrounds a sleep and exits; rank 1 ends only once that sleep is gone, so a launcher that
  // kills stragglers only at the end runs into --timeout (exit 124).
  const TempDir dir;
  const std::string file = (dir.path() / "straggler").string();
  const CommandResult r = run_command(cohort_run(
      {"-n", "2", "--timeout", "60", "--", "sh", "-c",
       "if [ $COHORT_RANK = 0 ]; then sleep infinity & echo $! > " + file + ".tmp && mv " + file +
           ".tmp " + file +
           "; exit 0; fi; "
           "while [ ! -s " +
           file + " ]; do sleep 0.02; done; p=$(cat " + file +
           "); while kill -0 $p 2>/dev/null; do sleep 0.02; done; echo straggler gone"}));
  CAPTURE(r.out, r.err);
  CHECK(r.exit_code == 0);
  CHECK(contains(r.out, "straggler gone"));
  check_nothing_left_behind();
}

TEST_CASE("cohort-run kills a rank that ignores SIGTERM after the grace period", "[cohort-run]") {
  // A marker unique to this run, to look for survivors by command line.
  const std::string marker = "cohort_hung_rank_" + std::to_string(::getpid());
  // Rank 1 fails only once rank 0's last shell ignores SIGTERM, which that shell says through a
  // FIFO (opening a FIFO blocks until both ends are open). Rank 0 then stays until killed.
  const TempDir dir("cohort-run-test");
  const std::string ignoring = make_fifo(dir, "rank0-ignores-term");
  const CommandResult r =
      run_command(cohort_run({"-n", "2", "--grace", "1", "--", "sh", "-c",
                              "if [ $COHORT_RANK = 1 ]; then read ready < " + ignoring +
                                  "; exit 3; fi; trap '' TERM; "
                                  "exec sh -c 'trap \"\" TERM; echo ready > " +
                                  ignoring + "; sleep infinity; : " + marker + "'"}));
  CAPTURE(r.out, r.err);
  CHECK(r.exit_code == 3);
  CHECK(contains(r.err, "stopped ranks on node 0: 0 (SIGKILL after the grace period: 0)"));
  const CommandResult survivors = run_command({"pgrep", "-f", marker});
  CHECK(survivors.exit_code == 1);  // pgrep: nothing matched
  check_nothing_left_behind();
}

TEST_CASE("cohort-run tags output lines, flushes partial lines, and writes log files",
          "[cohort-run]") {
  const std::string dir = "/tmp/cohort-run-logs-" + std::to_string(::getpid());
  const std::string script =
      "printf 'first\\nsecond\\nno newline'; printf 'to stderr %s\\n' $COHORT_RANK >&2";
  const CommandResult r =
      run_command(cohort_run({"-n", "2", "--log-dir", dir, "--", "sh", "-c", script}));
  CAPTURE(r.out, r.err);
  REQUIRE(r.exit_code == 0);
  for (int rank = 0; rank < 2; ++rank) {
    const std::string tag = "[rank " + std::to_string(rank) + "] ";
    CHECK(contains(r.out, tag + "first\n"));
    CHECK(contains(r.out, tag + "second\n"));
    CHECK(contains(r.out, tag + "no newline\n"));
    CHECK(contains(r.err, tag + "to stderr " + std::to_string(rank) + "\n"));
    // Log files hold the bytes exactly as written, untagged.
    CHECK(read_file(dir + "/rank" + std::to_string(rank) + ".out") == "first\nsecond\nno newline");
    CHECK(read_file(dir + "/rank" + std::to_string(rank) + ".err") ==
          "to stderr " + std::to_string(rank) + "\n");
  }
  std::filesystem::remove_all(dir);

  const CommandResult plain =
      run_command(cohort_run({"-n", "2", "--no-tag-output", "--", "sh", "-c", "echo untagged"}));
  REQUIRE(plain.exit_code == 0);
  CHECK(plain.out == "untagged\nuntagged\n");
  check_nothing_left_behind();
}

TEST_CASE("cohort-run forwards SIGINT to every rank", "[cohort-run]") {
  RunningCommand launcher(
      cohort_run({"-n", "2", "--", "sh", "-c",
                  "trap 'echo caught INT; exit 9' INT; echo ready; sleep infinity & wait"}));
  REQUIRE(launcher.wait_for_output("[rank 0] ready", 30s));
  REQUIRE(launcher.wait_for_output("[rank 1] ready", 30s));
  ::kill(launcher.pid(), SIGINT);
  const CommandResult r = launcher.wait(30s);
  CAPTURE(r.out, r.err);
  CHECK(r.exit_code == 128 + SIGINT);
  CHECK(contains(r.out, "[rank 0] caught INT"));
  CHECK(contains(r.out, "[rank 1] caught INT"));
  CHECK(contains(r.err, "received SIGINT"));
  check_nothing_left_behind();
}

TEST_CASE("cohort-run passes SIGUSR1 and SIGUSR2 to every rank and goes on", "[cohort-run]") {
  // The application's signals (a checkpoint warning, a flight-record dump): each rank gets them,
  // the launcher neither dies of their default action nor stops the job.
  RunningCommand launcher(
      cohort_run({"-n", "2", "--", "sh", "-c",
                  "trap 'echo caught USR1' USR1; trap 'echo caught USR2; exit 0' USR2; echo ready; "
                  "sleep infinity & while :; do wait $!; done"}));
  REQUIRE(launcher.wait_for_output("[rank 0] ready", 30s));
  REQUIRE(launcher.wait_for_output("[rank 1] ready", 30s));
  ::kill(launcher.pid(), SIGUSR1);
  REQUIRE(launcher.wait_for_output("[rank 0] caught USR1", 30s));
  REQUIRE(launcher.wait_for_output("[rank 1] caught USR1", 30s));
  ::kill(launcher.pid(), SIGUSR2);
  const CommandResult r = launcher.wait(30s);
  CAPTURE(r.out, r.err);
  CHECK(r.exit_code == 0);
  CHECK(contains(r.out, "[rank 0] caught USR2"));
  CHECK(contains(r.out, "[rank 1] caught USR2"));
  check_nothing_left_behind();
}

TEST_CASE("cohort-run --timeout stops the job with exit code 124", "[cohort-run]") {
  const CommandResult r =
      run_command(cohort_run({"--timeout", "0.5", "--grace", "1", "-n", "2", "sleep", "infinity"}));
  CAPTURE(r.out, r.err);
  CHECK(r.exit_code == 124);
  CHECK(contains(r.err, "exceeded --timeout"));
  CHECK(contains(r.err, "stopped ranks on node 0: 0, 1"));
  check_nothing_left_behind();
}

TEST_CASE("cohort-run reports a program that cannot be executed", "[cohort-run]") {
  const CommandResult r = run_command(cohort_run({"-n", "2", "--", "/nonexistent/program"}));
  CAPTURE(r.out, r.err);
  CHECK(r.exit_code == 127);
  CHECK(contains(r.err, "cannot execute '/nonexistent/program'"));
  check_nothing_left_behind();
}

TEST_CASE("cohort-run rejects inconsistent node options", "[cohort-run]") {
  const CommandResult out_of_range = run_command(
      cohort_run({"--nnodes", "2", "--node-rank", "2", "--master-port", "1234", "--", "true"}));
  CHECK(out_of_range.exit_code == 2);
  CHECK(contains(out_of_range.err, "--node-rank 2"));
  const CommandResult no_port = run_command(cohort_run({"--nnodes", "2", "--", "true"}));
  CHECK(no_port.exit_code == 2);
  CHECK(contains(no_port.err, "--master-port"));
  const CommandResult no_program = run_command(cohort_run({"-n", "2"}));
  CHECK(no_program.exit_code == 2);
  // A timeout past a year (the deadline would overflow) is refused like any bad option.
  const CommandResult forever = run_command(cohort_run({"--timeout", "1e12", "--", "true"}));
  CHECK(forever.exit_code == 2);
  CHECK(contains(forever.err, "--timeout"));
  const CommandResult no_token = run_command(
      cohort_run({"--nnodes", "2", "--master-port", "1234", "--", "true"}), {{"COHORT_TOKEN", ""}});
  CHECK(no_token.exit_code == 1);
  CHECK(contains(no_token.err, "COHORT_TOKEN"));
  check_nothing_left_behind();
}

TEST_CASE("two cohort-run launchers form one job of two nodes", "[cohort-run][nodes]") {
  const std::map<std::string, std::string> env{{"COHORT_TOKEN", "two-node-test-token"}};
  const std::string port = std::to_string(cohort::test::free_port());
  auto node = [&](int node_rank, const std::string& script) {
    return cohort_run({"--nnodes", "2", "--node-rank", std::to_string(node_rank), "-n", "2",
                       "--master-addr", "127.0.0.1", "--master-port", port, "--grace", "2", "--",
                       "sh", "-c", script});
  };

  SECTION("ranks 0..3 are spread over the nodes, contiguous per node") {
    const std::string script =
        "echo placement $COHORT_RANK $COHORT_LOCAL_RANK $COHORT_NODE_RANK $COHORT_WORLD_SIZE "
        "$COHORT_NNODES $COHORT_STORE_PORT $GROUP_RANK $MASTER_PORT";
    RunningCommand node1(node(1, script), env);
    RunningCommand node0(node(0, script), env);
    const CommandResult r0 = node0.wait(60s);
    const CommandResult r1 = node1.wait(60s);
    CAPTURE(r0.out, r0.err, r1.out, r1.err);
    CHECK(r0.exit_code == 0);
    CHECK(r1.exit_code == 0);
    // MASTER_PORT is the store's plus one on every node: torch.distributed's rank 0 binds it.
    const std::string next = std::to_string(std::stoi(port) + 1);
    CHECK(contains(r0.out, "[rank 0] placement 0 0 0 4 2 " + port + " 0 " + next + "\n"));
    CHECK(contains(r0.out, "[rank 1] placement 1 1 0 4 2 " + port + " 0 " + next + "\n"));
    CHECK(contains(r1.out, "[rank 2] placement 2 0 1 4 2 " + port + " 1 " + next + "\n"));
    CHECK(contains(r1.out, "[rank 3] placement 3 1 1 4 2 " + port + " 1 " + next + "\n"));
  }

  SECTION("a failure on node 1 stops node 0's ranks") {
    // Rank 3 fails once both of node 0's ranks have started: each writes a line to a FIFO that
    // rank 3 holds open for reading and writing (so it never sees an end of file), and rank 3
    // reads two lines. Every other rank stays until stopped.
    const TempDir dir("cohort-run-test");
    const std::string started = make_fifo(dir, "node0-started");
    RunningCommand node0(node(0, "echo up; echo up > " + started + "; sleep infinity"), env);
    RunningCommand node1(node(1, "if [ $COHORT_RANK = 3 ]; then exec 3<> " + started +
                                     "; read a <&3; read b <&3; echo node one fails >&2; "
                                     "exit 5; fi; sleep infinity"),
                         env);
    const CommandResult r1 = node1.wait(60s);
    const CommandResult r0 = node0.wait(60s);
    CAPTURE(r0.out, r0.err, r1.out, r1.err);
    CHECK(r1.exit_code == 5);
    CHECK(r0.exit_code == 5);
    for (const std::string& err : {r0.err, r1.err}) {
      CHECK(contains(err, "first failure: rank 3 of 4 (local rank 1, node 1, pid "));
      CHECK(contains(err, "node one fails"));
    }
    CHECK(contains(r1.err, "stopped ranks on node 1: 2"));
    CHECK(contains(r0.err, "stopped ranks on node 0: 0, 1"));
  }

  // node 0's launcher frozen (SIGSTOP: as a hung host or a dropped link, the connection stays up
  // and nothing answers). Its ranks run `exec sleep infinity`, so once it is killed at the end
  // they die with it (PR_SET_PDEATHSIG) and nothing is left behind.
  auto node_with_store_timeout = [&](int node_rank, const std::string& seconds,
                                     const std::string& script) {
    return cohort_run({"--nnodes", "2", "--node-rank", std::to_string(node_rank), "-n", "2",
                       "--master-addr", "127.0.0.1", "--master-port", port, "--grace", "2",
                       "--store-timeout", seconds, "--", "sh", "-c", script});
  };

  SECTION("a node 0 that stops answering: node 1 stops its ranks after --store-timeout") {
    // node 0's own deadline is long: only node 1 may give up, and only once node 0 froze.
    RunningCommand node0(node_with_store_timeout(0, "600", "exec sleep infinity"), env);
    RunningCommand node1(node_with_store_timeout(1, "3", "echo up; exec sleep infinity"), env);
    REQUIRE(node1.wait_for_output("[rank 2] up", 30s));
    REQUIRE(node1.wait_for_output("[rank 3] up", 30s));
    REQUIRE(stop_process(node0.pid(), 30s));
    // With the store's usual deadline (300 s) node 1 would poll on and never finish in time.
    const CommandResult r1 = node1.wait(60s);
    REQUIRE(::kill(node0.pid(), SIGKILL) == 0);
    const CommandResult r0 = node0.wait(30s);
    CAPTURE(r0.out, r0.err, r1.out, r1.err);
    CHECK(r1.exit_code == 1);
    CHECK(contains(r1.err, "lost the job store at 127.0.0.1:" + port));
    CHECK(contains(r1.err, "stopped ranks on node 1: 2, 3"));
    CHECK(r0.exit_code == 128 + SIGKILL);
    // Killed with the launcher, node 0's ranks are ours to reap.
    CHECK(cohort::test::reap_orphans(2, 30s).size() == 2);
  }

  SECTION("a failure on node 1 while node 0 is silent stops node 1's ranks at once") {
    // The store's deadline is long: the stop must not wait for node 0 to answer. Rank 3 fails
    // when the test writes to its FIFO, once node 0 is frozen; rank 2 says when it is stopped.
    const TempDir dir("cohort-run-test");
    const std::string go = make_fifo(dir, "go");
    RunningCommand node0(node_with_store_timeout(0, "600", "exec sleep infinity"), env);
    RunningCommand node1(
        node_with_store_timeout(1, "600",
                                "if [ $COHORT_RANK = 3 ]; then exec 3<> " + go +
                                    "; echo up; read a <&3; echo rank three fails >&2; exit 7; "
                                    "fi; trap 'echo stopped; exit 0' TERM; echo up; "
                                    "sleep infinity & wait"),
        env);
    REQUIRE(node1.wait_for_output("[rank 2] up", 30s));
    REQUIRE(node1.wait_for_output("[rank 3] up", 30s));
    REQUIRE(stop_process(node0.pid(), 30s));
    write_go(go);
    // Publishing the failure waits on node 0 (up to 600 s); stopping rank 2 must not.
    CHECK(node1.wait_for_output("[rank 2] stopped", 30s));
    // node 0 gone for good: the publication fails at once and node 1 reports its own view.
    REQUIRE(::kill(node0.pid(), SIGKILL) == 0);
    const CommandResult r1 = node1.wait(60s);
    const CommandResult r0 = node0.wait(30s);
    CAPTURE(r0.out, r0.err, r1.out, r1.err);
    CHECK(r1.exit_code == 7);
    CHECK(contains(r1.err, "first failure: rank 3 of 4 (local rank 1, node 1, pid "));
    CHECK(contains(r1.err, "rank three fails"));
    CHECK(contains(r1.err, "could not tell the other nodes that the job stopped"));
    CHECK(contains(r1.err, "stopped ranks on node 1: 2"));
    CHECK(cohort::test::reap_orphans(2, 30s).size() == 2);
  }
  check_nothing_left_behind();
}
