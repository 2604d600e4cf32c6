#pragma once

// An environment variable set (or removed) for one scope: a test that configures cohort through
// its variables, or a launch whose ranks inherit them, leaves the process as it found it.
// setenv() is not thread-safe: create one before starting threads or forking ranks.

#include <optional>
#include <string>

namespace cohort::test {

class ScopedEnv {
 public:
  /// Sets `name` to `value`, or removes it when `value` is std::nullopt. The destructor restores
  /// the value the variable had before (or its absence).
  ScopedEnv(std::string name, std::optional<std::string> value);
  ~ScopedEnv();
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  std::optional<std::string> previous_;
};

/// Removes every variable a launcher (cohort-run, torchrun, mpirun, srun) could have set, and
/// every COHORT_* tunable, so init() in this process makes a plain world of one. For in-process
/// tests only (it does not restore them).
void clear_launcher_variables();

}  // namespace cohort::test
