#pragma once

// The `timeout` of a training helper's options, checked where the helper starts: the core
// refuses a timeout outside (0, kMaxTimeout] only once an op starts, which for a helper would
// be after it changed something, or on one rank only while the others wait in the op.

#include <chrono>
#include <optional>
#include <string_view>

namespace cohort::train {

/// Throws InvalidArgument naming `where` and the value unless `timeout` is unset (the
/// communicator's default) or positive and at most kMaxTimeout (one year).
void check_timeout_option(std::string_view where, std::optional<std::chrono::milliseconds> timeout);

/// `timeout` where check_timeout_option accepts it, else unset: the deadline for an agreement
/// that a rank which rejected its own options still joins, so that the others do not wait out
/// theirs.
std::optional<std::chrono::milliseconds> usable_timeout(
    std::optional<std::chrono::milliseconds> timeout) noexcept;

}  // namespace cohort::train
