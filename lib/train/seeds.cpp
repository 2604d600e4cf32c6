// Accelerate's set_seed(seed, device_specific): the seed is offset by the rank when each device
// should draw its own stream (dropout masks differ between data-parallel replicas), and left
// alone when every rank must draw the same numbers (identical initial weights without a
// broadcast).

#include <cohort/train/random.hpp>

#include <cstdint>

namespace cohort::train {

std::uint64_t set_seed(const Communicator& comm, std::uint64_t seed, bool device_specific,
                       const std::function<void(std::uint64_t)>& apply) {
  // Unsigned arithmetic wraps modulo 2^64, as documented. Accelerate's Python ints would grow
  // past 2^64 instead, which torch.manual_seed then rejects; wrapping keeps every rank seedable.
  const std::uint64_t rank_seed =
      device_specific ? seed + static_cast<std::uint64_t>(comm.rank()) : seed;
  if (apply) apply(rank_seed);
  return rank_seed;
}

}  // namespace cohort::train
