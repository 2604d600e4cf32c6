#include "support/simulated_hosts.hpp"

#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <stdexcept>
#include <string>

namespace cohort::test {

bool can_simulate_hosts() {
  const pid_t child = fork();
  if (child < 0) return false;
  if (child == 0) _exit(unshare(CLONE_NEWUTS) == 0 ? 0 : 1);
  int status = 0;
  if (waitpid(child, &status, 0) != child) return false;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

void become_simulated_host(int host) {
  if (unshare(CLONE_NEWUTS) != 0) throw std::runtime_error("unshare(CLONE_NEWUTS) failed");
  const std::string name = "cohort-simhost-" + std::to_string(host);
  if (sethostname(name.c_str(), name.size()) != 0) throw std::runtime_error("sethostname failed");
}

}  // namespace cohort::test
