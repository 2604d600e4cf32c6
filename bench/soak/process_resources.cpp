#include "process_resources.hpp"

#include <cstring>
#include <fstream>
#include <stdexcept>
#include <string>

#include <dirent.h>
#include <unistd.h>

namespace cohort::soak {
namespace {

// Calls fn(name) for every entry of `path` but "." and "..".
template <class F>
void list_directory(const char* path, F&& fn) {
  DIR* dir = ::opendir(path);
  if (!dir) throw std::runtime_error(std::string("soak: cannot list ") + path);
  while (const dirent* entry = ::readdir(dir)) {
    if (std::strcmp(entry->d_name, ".") == 0 || std::strcmp(entry->d_name, "..") == 0) continue;
    fn(entry->d_name);
  }
  ::closedir(dir);
}

}  // namespace

ProcessResources sample_resources() {
  ProcessResources r;
  list_directory("/proc/self/fd", [&](const char* name) {
    ++r.fds;
    const std::string link = std::string("/proc/self/fd/") + name;
    char target[256] = {};
    const ssize_t n = ::readlink(link.c_str(), target, sizeof target - 1);
    if (n > 0 && std::strncmp(target, "/memfd:", 7) == 0) ++r.memfd_fds;
  });
  --r.fds;  // the listing's own descriptor
  list_directory("/proc/self/task", [&](const char*) { ++r.threads; });

  std::ifstream maps("/proc/self/maps");
  if (!maps) throw std::runtime_error("soak: cannot read /proc/self/maps");
  std::string line;
  while (std::getline(maps, line))
    if (line.find("/memfd:") != std::string::npos) ++r.memfd_mappings;
  return r;
}

std::string to_string(const ProcessResources& r) {
  return "fds=" + std::to_string(r.fds) + " memfd_fds=" + std::to_string(r.memfd_fds) +
         " memfd_mappings=" + std::to_string(r.memfd_mappings) +
         " threads=" + std::to_string(r.threads);
}

}  // namespace cohort::soak
