#include "support/scoped_env.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include <unistd.h>  // environ (glibc declares it for _GNU_SOURCE, which g++ defines)

namespace cohort::test {
namespace {

void set_or_unset(const std::string& name, const std::optional<std::string>& value) {
  const int rc = value ? ::setenv(name.c_str(), value->c_str(), 1) : ::unsetenv(name.c_str());
  if (rc != 0)
    throw std::runtime_error("cannot change environment variable " + name + ": " +
                             std::strerror(errno));
}

}  // namespace

ScopedEnv::ScopedEnv(std::string name, std::optional<std::string> value) : name_(std::move(name)) {
  if (const char* old = std::getenv(name_.c_str())) previous_ = old;
  set_or_unset(name_, value);
}

ScopedEnv::~ScopedEnv() {
  // Restoring cannot fail for a name the constructor already set; a destructor must not throw.
  const int rc =
      previous_ ? ::setenv(name_.c_str(), previous_->c_str(), 1) : ::unsetenv(name_.c_str());
  static_cast<void>(rc);
}

void clear_launcher_variables() {
  const char* prefixes[] = {
      "COHORT_",     "RANK",        "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
      "MASTER_ADDR", "MASTER_PORT", "OMPI_",      "PMI_",       "PMIX_",
      "SLURM_"};
  std::vector<std::string> names;
  for (char** e = environ; *e; ++e) {
    const std::string entry(*e);
    const std::string name = entry.substr(0, entry.find('='));
    for (const char* prefix : prefixes)
      if (name.rfind(prefix, 0) == 0) names.push_back(name);
  }
  for (const auto& name : names) ::unsetenv(name.c_str());
}

}  // namespace cohort::test
