#pragma once

// The list of message sizes one run sweeps, nccl-tests style: from --minbytes to --maxbytes,
// multiplying by --stepfactor or adding --stepbytes.

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace cohort::bench {

/// Parses a byte count: decimal digits with an optional K, M or G suffix (either case), each a
/// power of 1024 ("64M" is 67108864). Throws Error(InvalidArgument) naming `what` and the text
/// for anything else, and for values that overflow 64 bits.
std::uint64_t parse_size(std::string_view text, std::string_view what = "size");

struct SweepSpec {
  std::uint64_t min_bytes = 8;
  std::uint64_t max_bytes = 64ull << 20;
  /// Multiply by this (>= 2) between sizes; ignored when step_bytes > 0.
  std::uint64_t step_factor = 2;
  /// Add this between sizes when > 0.
  std::uint64_t step_bytes = 0;
};

/// Sweeps never list more sizes than this, so a tiny --stepbytes cannot make a run endless.
inline constexpr std::size_t kMaxSweepSizes = 100000;

/// The sizes of `spec`, ascending, from min_bytes up to and including max_bytes. Throws
/// Error(InvalidArgument) when min > max, the factor is below 2 (without step bytes), a
/// factor sweep starts at 0 (it would never grow), or the sweep has more than kMaxSweepSizes.
std::vector<std::uint64_t> make_sweep(const SweepSpec& spec);

}  // namespace cohort::bench
