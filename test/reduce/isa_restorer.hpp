// Puts back the detected instruction set when a test that forced another one ends, shared by the
// reduce and training-kernel tests that walk every ISA this CPU runs.

#pragma once

#include "reduce/dispatch.hpp"

namespace cohort::reduce::testing {

/// Restores the detected ISA when a test that forced one ends (even by a failed REQUIRE).
struct IsaRestorer {
  IsaRestorer() = default;
  IsaRestorer(const IsaRestorer&) = delete;
  IsaRestorer& operator=(const IsaRestorer&) = delete;
  ~IsaRestorer() { force_isa(detected_isa()); }
};

}  // namespace cohort::reduce::testing
