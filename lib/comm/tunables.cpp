#include "comm/tunables.hpp"

#include <cohort/error.hpp>

#include "core/log.hpp"

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <string>

namespace cohort::comm {
namespace {

std::chrono::milliseconds parse_timeout(const char* text) {
  char* end = nullptr;
  const double seconds = std::strtod(text, &end);
  // Bounded above so the conversion to milliseconds (and deadline arithmetic) cannot overflow.
  constexpr double kMaxSeconds = 365.0 * 24 * 3600;
  if (end == text || *end != '\0' || !std::isfinite(seconds) || seconds <= 0 ||
      seconds > kMaxSeconds) {
    throw Error(ErrorCode::InvalidArgument,
                std::string(kTimeoutVariable) + "='" + text +
                    "' is not a positive number of seconds (at most one year)");
  }
  const auto ms = static_cast<long long>(std::ceil(seconds * 1000.0));
  return std::chrono::milliseconds(ms);
}

bool parse_debug(const char* text) {
  std::string value(text);
  for (char& c : value) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (value == "detail") return true;
  if (value.empty() || value == "off" || value == "0" || value == "none") return false;
  COHORT_LOG_WARN("ignoring {}='{}': expected 'detail' or 'off'", kDebugVariable, text);
  return false;
}

}  // namespace

Tunables read_tunables() {
  Tunables t;
  if (const char* text = std::getenv(kTimeoutVariable); text && *text)
    t.timeout = parse_timeout(text);
  if (const char* text = std::getenv(kDebugVariable)) t.debug_detail = parse_debug(text);
  return t;
}

}  // namespace cohort::comm
