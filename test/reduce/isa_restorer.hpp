// Puts back the process's own instruction set when a test that forced another one ends, shared
// by the reduce and training-kernel tests that walk every ISA this CPU runs.

#pragma once

#include "reduce/dispatch.hpp"
#include "reduce/reduce.hpp"

namespace cohort::reduce::testing {

/// Restores, when a test that forced an ISA ends (even by a failed REQUIRE), the one the process
/// runs without the test: COHORT_KERNEL_ISA's if set and valid, else the widest.
struct IsaRestorer {
  IsaRestorer() = default;
  IsaRestorer(const IsaRestorer&) = delete;
  IsaRestorer& operator=(const IsaRestorer&) = delete;
  ~IsaRestorer() {
    try {
      apply_kernel_isa_tunable();
    } catch (...) {
      force_isa(detected_isa());
    }
  }
};

}  // namespace cohort::reduce::testing
