#include "transport/tunables.hpp"

#include <cohort/error.hpp>

#include <charconv>
#include <cstdlib>
#include <string>
#include <string_view>

namespace cohort::transport {

TransportTunables read_transport_tunables() {
  TransportTunables tunables;
  if (const char* text = std::getenv(kSpinUsEnv); text && *text) {
    const std::string_view value(text);
    long long us = -1;
    const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), us);
    if (ec != std::errc() || end != value.data() + value.size() || us < 0)
      throw Error(ErrorCode::InvalidArgument, std::string(kSpinUsEnv) + "='" + text +
                                                  "' is not a non-negative number of microseconds");
    tunables.spin = std::chrono::microseconds(us);
  }
  if (const char* text = std::getenv(kUcxErrHandlingEnv); text && *text) {
    const std::string_view value(text);
    if (value == "auto")
      tunables.err_handling = PeerErrorHandling::Auto;
    else if (value == "peer")
      tunables.err_handling = PeerErrorHandling::Peer;
    else
      throw Error(ErrorCode::InvalidArgument,
                  std::string(kUcxErrHandlingEnv) + "='" + text + "' (expected 'auto' or 'peer')");
  }
  if (const char* text = std::getenv(kSharedMemoryEnv); text && *text) {
    const std::string_view value(text);
    if (value == "auto")
      tunables.shared_memory = true;
    else if (value == "off")
      tunables.shared_memory = false;
    else
      throw Error(ErrorCode::InvalidArgument,
                  std::string(kSharedMemoryEnv) + "='" + text + "' (expected 'auto' or 'off')");
  }
  return tunables;
}

}  // namespace cohort::transport
