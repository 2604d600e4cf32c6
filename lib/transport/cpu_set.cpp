#include "transport/cpu_set.hpp"

#include <sched.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <memory>

#include <fmt/format.h>

namespace cohort::transport {

CpuSet affinity_cpus() {
  // The kernel's mask can be wider than cpu_set_t's 1024 CPUs: it refuses a buffer that is too
  // small with EINVAL, so grow until it fits (a bound keeps a broken kernel from looping us).
  for (std::size_t cpus = 1024; cpus <= (std::size_t{1} << 20); cpus *= 2) {
    const std::size_t bytes = CPU_ALLOC_SIZE(cpus);
    std::unique_ptr<cpu_set_t, void (*)(cpu_set_t*)> mask(CPU_ALLOC(cpus),
                                                          [](cpu_set_t* m) { CPU_FREE(m); });
    if (!mask) return {};
    CPU_ZERO_S(bytes, mask.get());
    if (sched_getaffinity(0, bytes, mask.get()) != 0) {
      if (errno == EINVAL) continue;
      return {};
    }
    CpuSet set((cpus + 63) / 64, 0);
    for (std::size_t c = 0; c < cpus; ++c)
      if (CPU_ISSET_S(c, bytes, mask.get())) set[c / 64] |= std::uint64_t{1} << (c % 64);
    while (!set.empty() && set.back() == 0) set.pop_back();
    return set;
  }
  return {};
}

unsigned cpus_in_union(std::span<const CpuSet> sets, unsigned fallback) {
  // One rank that could not read its mask makes the union unknown: count the machine's.
  std::size_t words = 0;
  for (const CpuSet& set : sets) {
    if (set.empty()) return fallback;
    words = std::max(words, set.size());
  }
  if (words == 0) return fallback;
  CpuSet all(words, 0);
  for (const CpuSet& set : sets)
    for (std::size_t w = 0; w < set.size(); ++w) all[w] |= set[w];
  unsigned count = 0;
  for (const std::uint64_t word : all) count += static_cast<unsigned>(std::popcount(word));
  return count;
}

std::string describe_cpus(const CpuSet& set) {
  std::string text;
  const std::size_t cpus = set.size() * 64;
  const auto has = [&](std::size_t c) { return (set[c / 64] >> (c % 64) & 1) != 0; };
  for (std::size_t c = 0; c < cpus;) {
    if (!has(c)) {
      ++c;
      continue;
    }
    std::size_t last = c;
    while (last + 1 < cpus && has(last + 1)) ++last;
    if (!text.empty()) text += ',';
    text += last == c ? fmt::format("{}", c) : fmt::format("{}-{}", c, last);
    c = last + 1;
  }
  return text.empty() ? "none" : text;
}

}  // namespace cohort::transport
