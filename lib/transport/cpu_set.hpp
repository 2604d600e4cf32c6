#pragma once

// Which CPUs a host's ranks may run on, for the wait policy (wait_policy.hpp): whether ranks
// that wait should spin or make way depends on how many hardware threads the ranks of a host
// share, not on how many the machine has. A job confined to a few cores (taskset, a cgroup
// cpuset, a container's --cpuset-cpus, a batch system's binding) has every rank's affinity mask
// name those cores; a job that binds each rank to cores of its own (Open MPI's bind-to-core,
// Slurm's --cpu-bind) has disjoint masks whose union is what the ranks share. So each rank
// publishes its mask and a host's count is the size of the union of its ranks' masks.

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace cohort::transport {

/// A set of CPUs: bit c of word c / 64 is CPU c.
using CpuSet = std::vector<std::uint64_t>;

/// The CPUs this process may run on (sched_getaffinity). Empty when the kernel would not say:
/// callers then count std::thread::hardware_concurrency() CPUs.
CpuSet affinity_cpus();

/// How many CPUs are in at least one of `sets`; `fallback` when there are none or some set is
/// empty (a rank that could not read its mask: the union is unknown).
unsigned cpus_in_union(std::span<const CpuSet> sets, unsigned fallback);

/// "0-3,8,10-11": for logs and error messages.
std::string describe_cpus(const CpuSet& set);

}  // namespace cohort::transport
