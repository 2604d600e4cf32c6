#include "support/scoped_env.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

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

}  // namespace cohort::test
