// Puts back the detected instruction set when a test that forced another one ends, shared by the
// reduce tests that walk every ISA this CPU runs.

#pragma once

#include "reduce/dispatch.hpp"

namespace cohort::reduce::testing {

/// Restores the detected ISA when a test that forced one ends (even by a failed REQUIRE).
struct IsaRestorer {
  ~IsaRestorer() { force_isa(detected_isa()); }
};

}  // namespace cohort::reduce::testing
