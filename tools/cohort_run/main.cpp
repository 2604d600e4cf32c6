// cohort-run: the launcher. See run_job.hpp for what one node's launcher does.

#include <cohort/error.hpp>

#include "cohort_run/job_config.hpp"
#include "cohort_run/run_job.hpp"
#include "launch/terminal_echo.hpp"

#include <chrono>
#include <exception>
#include <string>

#include <unistd.h>

int main(int argc, char** argv) {
  cohort::run::JobConfig config;
  if (const std::optional<int> exit_code = cohort::run::parse_command_line(argc, argv, config)) {
    return *exit_code;
  }
  try {
    return cohort::run::run_job(config);
  } catch (const std::exception& e) {
    // Through the echo the job's output went through, after it, within its bound.
    const auto echo = cohort::launcher::TerminalEcho::shared(STDERR_FILENO);
    echo->write_line(std::string("cohort-run: error: ") + e.what() + "\n");
    echo->drain(std::chrono::seconds(5));
    return 1;
  }
}
