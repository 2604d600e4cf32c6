// libFuzzer harness: the COHORT_ALGO parser, algorithms::parse_algorithm_overrides
// (lib/algorithms/selection.hpp), on arbitrary text up to the first NUL.
//
// Invariants:
// - it returns overrides exactly when a separate reading of the grammar accepts the text, and
//   then the same overrides; otherwise it throws Error(InvalidArgument) naming COHORT_ALGO. The
//   grammar, read from selection.hpp: empty (or blank) text means no override; otherwise
//   comma-separated "collective:algorithm" entries, blanks (space, tab, newline) around each
//   token ignored; the collective is one of the nine algorithm families (v-forms, send and recv
//   have no algorithms of their own), given at most once; the algorithm is "auto" or one that
//   implemented_algorithms() lists for it;
// - every accepted override is printed back as "name:algorithm" entries and parses again to the
//   same overrides (the form describe_tunables and error messages show).

#include "algorithms/selection.hpp"
#include "fuzz_check.hpp"

#include <algorithm>
#include <optional>
#include <string>

using namespace cohort;
using namespace cohort::algorithms;

namespace {

std::string_view blank_trimmed(std::string_view s) {
  const auto first = s.find_first_not_of(" \t\n");
  if (first == std::string_view::npos) return {};
  return s.substr(first, s.find_last_not_of(" \t\n") - first + 1);
}

// The grammar above, written from the header's contract with the public name tables.
std::optional<AlgorithmOverrides> expected_overrides(std::string_view spec) {
  AlgorithmOverrides result;
  result.fill(Algorithm::Auto);
  if (blank_trimmed(spec).empty()) return result;
  std::array<bool, kCollectiveCount> seen{};
  std::size_t start = 0;
  for (;;) {
    const auto comma = spec.find(',', start);
    const auto entry =
        spec.substr(start, comma == std::string_view::npos ? spec.npos : comma - start);
    const auto colon = entry.find(':');
    if (colon == std::string_view::npos) return std::nullopt;
    const auto collective = collective_from_name(blank_trimmed(entry.substr(0, colon)));
    const auto algorithm = algorithm_from_name(blank_trimmed(entry.substr(colon + 1)));
    if (!collective || !algorithm) return std::nullopt;
    if (algorithm_family(*collective) != *collective || *collective == Collective::Send ||
        *collective == Collective::Recv)
      return std::nullopt;
    const auto implemented = implemented_algorithms(*collective);
    if (*algorithm != Algorithm::Auto &&
        std::find(implemented.begin(), implemented.end(), *algorithm) == implemented.end())
      return std::nullopt;
    const auto index = static_cast<std::size_t>(*collective);
    if (seen[index]) return std::nullopt;
    seen[index] = true;
    result[index] = *algorithm;
    if (comma == std::string_view::npos) return result;
    start = comma + 1;
  }
}

std::string printed(const AlgorithmOverrides& overrides) {
  std::string spec;
  for (std::size_t i = 0; i < overrides.size(); ++i) {
    if (overrides[i] == Algorithm::Auto) continue;
    if (!spec.empty()) spec += ',';
    spec += std::string(collective_name(static_cast<Collective>(i))) + ":" +
            std::string(algorithm_name(overrides[i]));
  }
  return spec;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string spec = fuzz::env_text(std::span(data, size));
  const auto expected = expected_overrides(spec);
  AlgorithmOverrides parsed;
  try {
    parsed = parse_algorithm_overrides(spec);
  } catch (const Error& e) {
    fuzz::require_invalid_argument(e, "parse_algorithm_overrides");
    FUZZ_REQUIRE(!expected, "refused '" + spec + "': " + e.message());
    FUZZ_REQUIRE(e.message().find("COHORT_ALGO") != std::string::npos,
                 "the message does not name COHORT_ALGO: " + e.message());
    return 0;
  }
  FUZZ_REQUIRE(expected, "accepted '" + spec + "'");
  FUZZ_REQUIRE(parsed == *expected, "'" + spec + "' parsed as '" + printed(parsed) +
                                        "', expected '" + printed(*expected) + "'");
  const std::string again = printed(parsed);
  FUZZ_REQUIRE(parse_algorithm_overrides(again) == parsed,
               "'" + again + "' does not parse back to itself");
  return 0;
}
