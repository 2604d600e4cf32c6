#include "soak_job.hpp"

#include "support/forked_child.hpp"
#include "support/sync_pipe.hpp"

#include <cohort/store.hpp>

#include <algorithm>
#include <csignal>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>

#include <dirent.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

namespace cohort::soak::test {
namespace {

using SteadyClock = std::chrono::steady_clock;
using cohort::test::ForkedChild;
using cohort::test::SyncPipe;

std::vector<std::string> directory_names(const char* path) {
  std::vector<std::string> names;
  DIR* dir = ::opendir(path);
  if (!dir) return names;
  while (const dirent* entry = ::readdir(dir)) {
    if (std::strcmp(entry->d_name, ".") != 0 && std::strcmp(entry->d_name, "..") != 0)
      names.emplace_back(entry->d_name);
  }
  ::closedir(dir);
  return names;
}

// The /dev/shm entries a cohort job could leave: cohort's own (none are expected: its arena is
// a memfd) and UCX's POSIX segments (which UCX unlinks once mapped). Other entries belong to
// other programs and are not compared, so unrelated activity on the machine cannot fail a job.
std::set<std::string> shm_entries() {
  std::set<std::string> entries;
  for (std::string& name : directory_names("/dev/shm")) {
    if (name.find("cohort") != std::string::npos || name.find("ucx") != std::string::npos)
      entries.insert(std::move(name));
  }
  return entries;
}

// Whether some live process has /dev/shm/<name> open or mapped: then it belongs to a program
// still running (another test on the machine), since every process of the job is gone.
bool held_by_live_process(const std::string& name) {
  const std::string path = "/dev/shm/" + name;
  for (const std::string& pid : directory_names("/proc")) {
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string fd_dir = "/proc/" + pid + "/fd";
    for (const std::string& fd : directory_names(fd_dir.c_str())) {
      char target[512] = {};
      const std::string link = fd_dir + "/" + fd;
      const ssize_t n = ::readlink(link.c_str(), target, sizeof target - 1);
      if (n > 0 && std::string(target, static_cast<std::size_t>(n)).rfind(path, 0) == 0)
        return true;
    }
    std::ifstream maps("/proc/" + pid + "/maps");
    std::string line;
    while (std::getline(maps, line))
      if (line.find(path) != std::string::npos) return true;
  }
  return false;
}

// System V segments whose creator is one of `pids` (columns of /proc/sysvipc/shm: key shmid
// perms size cpid ...).
std::vector<std::string> sysv_segments_created_by(const std::vector<pid_t>& pids) {
  std::vector<std::string> found;
  std::ifstream table("/proc/sysvipc/shm");
  std::string line;
  std::getline(table, line);  // the header
  while (std::getline(table, line)) {
    std::istringstream fields(line);
    std::string key, shmid, perms, size;
    pid_t cpid = 0;
    if (!(fields >> key >> shmid >> perms >> size >> cpid)) continue;
    if (std::find(pids.begin(), pids.end(), cpid) != pids.end())
      found.push_back("shmid " + shmid + " created by pid " + std::to_string(cpid));
  }
  return found;
}

// Children of this process other than the ranks already reaped: processes a rank left behind
// (re-parented here by the subreaper flag). Each is recorded, then killed and reaped so the
// next job starts clean.
std::vector<std::string> collect_leftover_children() {
  std::vector<std::string> leftovers;
  const std::string self = std::to_string(::getpid());
  for (const std::string& name : directory_names("/proc")) {
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat("/proc/" + name + "/stat");
    std::string text;
    std::getline(stat, text);
    // "pid (comm) state ppid ...": comm may hold spaces, so parse after the last ')'.
    const auto close = text.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(text.substr(close + 1));
    std::string state, ppid;
    rest >> state >> ppid;
    if (ppid != self) continue;
    leftovers.push_back("pid " + name + " " + text.substr(0, close + 1) + " state " + state);
    ::kill(static_cast<pid_t>(std::stol(name)), SIGKILL);
  }
  int status = 0;
  while (::waitpid(-1, &status, 0) > 0) {
  }
  return leftovers;
}

std::string make_token() {
  return "soak-" + std::to_string(::getpid()) + "-" +
         std::to_string(SteadyClock::now().time_since_epoch().count());
}

}  // namespace

JobResult run_soak_job(int ranks, const SessionOptions& options, std::chrono::seconds deadline) {
  if (::prctl(PR_SET_CHILD_SUBREAPER, 1) != 0)
    throw std::runtime_error("prctl(PR_SET_CHILD_SUBREAPER) failed");
  const std::set<std::string> shm_before = shm_entries();
  const std::string token = make_token();
  SyncPipe port_pipe;
  const auto start = SteadyClock::now();
  const auto end_by = start + deadline;

  std::vector<ForkedChild> children;
  children.reserve(static_cast<std::size_t>(ranks));
  for (int r = 0; r < ranks; ++r) {
    children.emplace_back([&, r] {
      RankPlacement placement;
      placement.rank = r;
      placement.world_size = ranks;
      placement.store_host = "127.0.0.1";
      placement.store_port = static_cast<std::uint16_t>(port_pipe.take(std::chrono::seconds(60)));
      placement.token = token;
      return run_soak_rank(placement, options);
    });
  }
  // Only now, with every rank forked, may the store's server thread start: a child forked
  // while it runs could inherit a lock it holds.
  TcpStoreOptions store_options;
  store_options.host = "127.0.0.1";
  store_options.token = token;
  TcpStoreServer server(store_options);
  for (int r = 0; r < ranks; ++r) port_pipe.post(server.port());

  JobResult result;
  result.exit_statuses.assign(static_cast<std::size_t>(ranks), 0);
  result.reports.assign(static_cast<std::size_t>(ranks), "");
  for (const ForkedChild& child : children) result.pids.push_back(child.pid());
  // The victim first: its exit is when the survivors' clock starts.
  std::vector<int> order;
  const int victim = options.soak.kill ? options.soak.kill->victim : -1;
  if (victim >= 0) order.push_back(victim);
  for (int r = 0; r < ranks; ++r)
    if (r != victim) order.push_back(r);
  std::optional<SteadyClock::time_point> died;
  for (int r : order) {
    const auto left = std::max(SteadyClock::duration::zero(), end_by - SteadyClock::now());
    const auto status = children[static_cast<std::size_t>(r)].join(
        std::chrono::duration_cast<std::chrono::milliseconds>(left));
    result.exit_statuses[static_cast<std::size_t>(r)] = status;
    if (r == victim) died = SteadyClock::now();
  }
  const auto last = SteadyClock::now();
  using std::chrono::duration_cast;
  using std::chrono::milliseconds;
  if (died) result.survivors_left_after = duration_cast<milliseconds>(last - *died);
  result.duration = duration_cast<milliseconds>(last - start);

  TcpStoreOptions client_options = store_options;
  client_options.port = server.port();
  TcpStore store(client_options);
  for (int r = 0; r < ranks; ++r) {
    const std::string key = kReportKeyPrefix + std::to_string(r);
    if (store.check({key}))
      result.reports[static_cast<std::size_t>(r)] = store.get_string(key, std::chrono::seconds(5));
  }

  result.leftover_processes = collect_leftover_children();
  for (const std::string& entry : shm_entries()) {
    if (!shm_before.count(entry) && !held_by_live_process(entry))
      result.leftover_shm.push_back(entry);
  }
  result.leftover_sysv_shm = sysv_segments_created_by(result.pids);
  return result;
}

}  // namespace cohort::soak::test
