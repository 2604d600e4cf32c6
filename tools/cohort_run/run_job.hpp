#pragma once

// One node's part of a cohort-run job: host (node 0) or join the store, start the local ranks,
// supervise them, coordinate stopping with the other nodes, print the summary.

#include "cohort_run/job_config.hpp"

namespace cohort::run {

/// Runs the job; returns cohort-run's exit code (0, the first failing rank's code or 128+signal,
/// 124 after --timeout, 128+signal when interrupted). Throws cohort::Error for setup failures.
int run_job(const JobConfig& config);

}  // namespace cohort::run
