#pragma once

// What each forked rank of a soak job runs: meet the others in the parent's store, create the
// world communicator, and run the soak session (bench/soak) as cohort-soak would under a
// launcher. Its exit code is the session's verdict.

#include "soak_session.hpp"

#include <cstdint>
#include <string>

namespace cohort::soak::test {

/// Where the job's store is and which rank this process is.
struct RankPlacement {
  int rank = 0;
  int world_size = 1;
  std::string store_host;
  std::uint16_t store_port = 0;
  std::string token;
};

/// Runs rank `placement.rank` of the job; returns its exit code (0: passed). Never throws:
/// anything thrown is reported on stderr and turns into exit code 1.
int run_soak_rank(const RankPlacement& placement, const SessionOptions& options);

}  // namespace cohort::soak::test
