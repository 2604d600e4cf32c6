// CPU sets (transport/cpu_set.hpp): the union's count, the description, and this process's mask
// against the kernel's own account of it in /proc/self/status.

#include "transport/cpu_set.hpp"

#include <catch2/catch.hpp>

#include <fstream>
#include <string>
#include <vector>

using namespace cohort::transport;

TEST_CASE("the union of CPU sets counts each CPU once", "[cpu_set]") {
  // {0, 1, 3} and {1, 2, 64}: CPUs 0-3 and 64.
  const std::vector<CpuSet> sets{{0b1011}, {0b0110, 0b1}};
  CHECK(cpus_in_union(sets, 99) == 5);
  CHECK(cpus_in_union(std::vector<CpuSet>{{0b1}, {0b1}, {0b1}}, 99) == 1);
  CHECK(cpus_in_union(std::vector<CpuSet>{{0, 0, 0x8000000000000000}}, 99) == 1);
}

TEST_CASE("an unknown mask makes the union unknown", "[cpu_set]") {
  CHECK(cpus_in_union(std::vector<CpuSet>{}, 7) == 7);
  CHECK(cpus_in_union(std::vector<CpuSet>{{0b1}, {}}, 7) == 7);
}

TEST_CASE("CPU sets are described as ranges", "[cpu_set]") {
  CHECK(describe_cpus({0b1011}) == "0-1,3");
  CHECK(describe_cpus({0, 0x8000000000000001}) == "64,127");
  CHECK(describe_cpus({~std::uint64_t{0}, 0b1}) == "0-64");
  CHECK(describe_cpus({}) == "none");
}

TEST_CASE("this process's CPUs are the kernel's Cpus_allowed_list", "[cpu_set]") {
  std::ifstream status("/proc/self/status");
  std::string line, allowed;
  while (std::getline(status, line))
    if (line.rfind("Cpus_allowed_list:", 0) == 0)
      allowed = line.substr(line.find_first_not_of(" \t", 18));
  REQUIRE_FALSE(allowed.empty());  // Linux has reported it since 2.6.28
  CHECK(describe_cpus(affinity_cpus()) == allowed);
}
