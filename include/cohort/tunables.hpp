#pragma once

/// The COHORT_* environment variables that tune cohort ("tunables": timeouts, spinning, shared
/// memory, logging, forced algorithms, ...), each declared once inside the library with its type,
/// default and a one-line description. The README's environment table lists the same ones.
///
/// When they are read: init(), connect_store() and Communicator::create() read every tunable
/// afresh, so a malformed value fails there with Error(InvalidArgument) naming the variable, its
/// value and what was expected, never on a first op. Anything else that needs one before those
/// (a Store deadline, the logger) reads them once on first use.

#include <string>

namespace cohort {

/// One line per tunable, "NAME = value (default D; type): description", with the value as set in
/// the environment now (a secret, COHORT_TOKEN, is shown as "<set, hidden>"; a malformed value is
/// marked and explained). Never throws Error for a malformed value: it is meant for printing
/// before (or instead of) starting a job, e.g. `cohort-bench --print-env`.
std::string describe_tunables();

}  // namespace cohort
