#include "size_sweep.hpp"

#include <cohort/error.hpp>

#include <limits>
#include <string>

namespace cohort::bench {
namespace {

[[noreturn]] void bad(std::string_view what, const std::string& message) {
  throw Error(ErrorCode::InvalidArgument, std::string(what) + ": " + message);
}

}  // namespace

std::uint64_t parse_size(std::string_view text, std::string_view what) {
  // Built by appending: operator+ on a literal trips GCC 12's -Wrestrict false positive.
  std::string shown(1, '\'');
  shown.append(text);
  shown.push_back('\'');
  if (text.empty()) bad(what, "empty size");
  std::uint64_t multiplier = 1;
  switch (text.back()) {
    case 'K':
    case 'k': multiplier = 1ull << 10; break;
    case 'M':
    case 'm': multiplier = 1ull << 20; break;
    case 'G':
    case 'g': multiplier = 1ull << 30; break;
    default: break;
  }
  std::string_view digits = multiplier == 1 ? text : text.substr(0, text.size() - 1);
  if (digits.empty()) bad(what, "size " + shown + " has no digits");
  constexpr auto kMax = std::numeric_limits<std::uint64_t>::max();
  std::uint64_t value = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') {
      bad(what, "size " + shown + " is not a number with an optional K, M or G suffix");
    }
    const auto digit = static_cast<std::uint64_t>(c - '0');
    if (value > (kMax - digit) / 10) bad(what, "size " + shown + " is too large");
    value = value * 10 + digit;
  }
  if (value > kMax / multiplier) bad(what, "size " + shown + " is too large");
  return value * multiplier;
}

std::vector<std::uint64_t> make_sweep(const SweepSpec& spec) {
  if (spec.min_bytes > spec.max_bytes) {
    bad("sweep", "minbytes " + std::to_string(spec.min_bytes) + " is larger than maxbytes " +
                     std::to_string(spec.max_bytes));
  }
  const bool additive = spec.step_bytes > 0;
  if (!additive && spec.step_factor < 2) {
    bad("sweep", "stepfactor " + std::to_string(spec.step_factor) + " must be at least 2");
  }
  if (!additive && spec.min_bytes == 0 && spec.max_bytes > 0) {
    bad("sweep", "minbytes 0 never grows by a factor; use --stepbytes or a positive minbytes");
  }
  std::vector<std::uint64_t> sizes;
  std::uint64_t size = spec.min_bytes;
  while (true) {
    if (sizes.size() == kMaxSweepSizes) {
      bad("sweep", "more than " + std::to_string(kMaxSweepSizes) +
                       " sizes; raise the step or narrow the range");
    }
    sizes.push_back(size);
    // Stop before the next step would pass max_bytes or overflow.
    const std::uint64_t room = spec.max_bytes - size;
    if (additive) {
      if (spec.step_bytes > room) break;
      size += spec.step_bytes;
    } else {
      if (size == 0 || size > spec.max_bytes / spec.step_factor) break;
      size *= spec.step_factor;
    }
  }
  return sizes;
}

}  // namespace cohort::bench
