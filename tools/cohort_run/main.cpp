// cohort-run: the launcher. See run_job.hpp for what one node's launcher does.

#include <cohort/error.hpp>

#include "cohort_run/job_config.hpp"
#include "cohort_run/run_job.hpp"

#include <cstdio>
#include <exception>

int main(int argc, char** argv) {
  cohort::run::JobConfig config;
  if (const std::optional<int> exit_code = cohort::run::parse_command_line(argc, argv, config)) {
    return *exit_code;
  }
  try {
    return cohort::run::run_job(config);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cohort-run: error: %s\n", e.what());
    return 1;
  }
}
