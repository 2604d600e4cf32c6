#pragma once

// Agreeing, before any data moves, that every rank called a collective helper with the same
// layout: each rank hashes what must match (counts, dtypes, roots, options) into a Digest and one
// allgather of 8 bytes per rank compares them. A rank whose own arguments were rejected sends a
// marker instead, so the others learn it and throw too rather than wait for it.

#include <cohort/communicator.hpp>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace cohort::train {

/// FNV-1a over 64-bit words: cheap, and any difference a caller can make changes it in practice.
class Digest {
 public:
  Digest& mix(std::uint64_t word) noexcept {
    for (int k = 0; k < 8; ++k) value_ = (value_ ^ ((word >> (8 * k)) & 0xff)) * 1099511628211ull;
    return *this;
  }
  std::uint64_t value() const noexcept { return value_; }

 private:
  std::uint64_t value_ = 1469598103934665603ull;
};

struct ArgumentAgreement {
  std::vector<int> rejected;  ///< ranks whose own arguments were rejected
  std::vector<int> differ;    ///< ranks whose digest differs from the first non-rejected rank's
};

/// Collective over `comm` (nothing to agree in a world of one): one allgather of the digests.
ArgumentAgreement agree_arguments(Communicator& comm, const Digest& digest, bool rejected,
                                  std::optional<std::chrono::milliseconds> timeout);

/// Throws InvalidArgument naming the ranks when `agreement` shows rejected or differing ranks
/// (call it on ranks whose own arguments were accepted). `op` names the call; `what` completes
/// "ranks 2 <what> differently from the other ranks", e.g. "registered gradients (counts,
/// dtypes, order) or bucket options".
void throw_if_disagreed(const ArgumentAgreement& agreement, const std::string& op,
                        const std::string& what);

}  // namespace cohort::train
