#pragma once

// spdlog's side of cohort's logger (core/log.hpp), for code that works with spdlog's own types:
// a sink that replaces stderr (a launcher's echo), a test that reads the lines.

#include "core/log.hpp"

#include <spdlog/spdlog.h>

#include <memory>

namespace cohort::log {

/// The shared logger, created on first use with the level from COHORT_LOG_LEVEL.
spdlog::logger& logger();

/// Sends every later line to `sink` instead of stderr, in the same format. Call before any
/// other thread may log (spdlog's list of sinks is not guarded): a launcher at its start.
void send_to(std::shared_ptr<spdlog::sinks::sink> sink);

}  // namespace cohort::log
