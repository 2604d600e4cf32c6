#pragma once

// Which ranks share a host closely enough to reach each other's memory and processes: equal
// identities mean the same kernel (boot id) and the same pid namespace, so a pid or a
// /proc/<pid>/fd path published by one rank means the same thing to the other.

#include <string>

namespace cohort::transport {

/// "hostname|boot id|pid namespace" of this process.
std::string local_host_identity();

}  // namespace cohort::transport
