#include "transport/host_identity.hpp"

#include <unistd.h>

#include <climits>
#include <fstream>

namespace cohort::transport {
namespace {

std::string first_line(const char* path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

}  // namespace

std::string local_host_identity() {
  // The hostname alone is not enough (containers share one name across kernels); the boot id
  // alone is not enough (containers on one kernel have separate pid namespaces).
  char host[HOST_NAME_MAX + 1] = {};
  gethostname(host, sizeof host - 1);
  char ns[64] = {};
  const ssize_t n = readlink("/proc/self/ns/pid", ns, sizeof ns - 1);
  return std::string(host) + "|" + first_line("/proc/sys/kernel/random/boot_id") + "|" +
         (n > 0 ? std::string(ns, static_cast<std::size_t>(n)) : std::string());
}

}  // namespace cohort::transport
