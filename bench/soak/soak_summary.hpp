#pragma once

// Text a soak run prints: the op mix one rank took part in, and the one-line report each rank
// publishes (and the test prints when something is wrong).

#include "soak_runner.hpp"

#include <string>

namespace cohort::soak {

/// Several lines: ops by collective, dtype and reduce op, and how many were async, in-place,
/// on forced algorithms, on sub-communicators.
std::string format_mix(const OpMix& mix);

/// One line: the verdict, ops, time, resources and the failure seen (if any).
std::string format_report(int rank, const RankOutcome& outcome, const std::string& verdict);

}  // namespace cohort::soak
