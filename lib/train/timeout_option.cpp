#include "train/timeout_option.hpp"

#include <cohort/error.hpp>
#include <cohort/work.hpp>

#include <fmt/format.h>

namespace cohort::train {
namespace {

bool acceptable(std::optional<std::chrono::milliseconds> timeout) noexcept {
  return !timeout || (timeout->count() > 0 && *timeout <= kMaxTimeout);
}

}  // namespace

void check_timeout_option(std::string_view where,
                          std::optional<std::chrono::milliseconds> timeout) {
  if (acceptable(timeout)) return;
  throw Error(ErrorCode::InvalidArgument,
              fmt::format("{}: timeout must be positive and at most one year ({} ms), got {} ms "
                          "(leave it unset for the communicator's default)",
                          where, kMaxTimeout.count(), timeout->count()));
}

std::optional<std::chrono::milliseconds> usable_timeout(
    std::optional<std::chrono::milliseconds> timeout) noexcept {
  return acceptable(timeout) ? timeout : std::nullopt;
}

}  // namespace cohort::train
