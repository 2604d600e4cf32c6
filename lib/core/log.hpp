#pragma once

// cohort's one logger. Lines go to stderr as "[cohort r<rank>/<size>] <level>: <message>".
// Use the macros so disabled levels cost one comparison and no formatting.

#include <spdlog/spdlog.h>

namespace cohort::log {

/// The shared logger, created on first use with the level from COHORT_LOG_LEVEL.
spdlog::logger& logger();

/// Sends every later line to `sink` instead of stderr, in the same format. Call before any
/// other thread may log (spdlog's list of sinks is not guarded): a launcher at its start.
void send_to(std::shared_ptr<spdlog::sinks::sink> sink);

/// Sets the level from the current tunables' COHORT_LOG_LEVEL (after reload_tunables(), so a
/// level set in-process before init() counts), unless set_log_level() has chosen one.
void apply_level_from_tunables();

}  // namespace cohort::log

// The level is checked before the arguments are evaluated: a disabled line costs one load and
// one comparison, even when its arguments call functions (algorithm_name(), ...), which
// spdlog's own level check inside logger().debug(...) would come too late to skip.
#define COHORT_LOG_AT(level, ...)                                                         \
  do {                                                                                    \
    ::spdlog::logger& cohort_log_logger_ = ::cohort::log::logger();                       \
    if (cohort_log_logger_.should_log(level)) cohort_log_logger_.log(level, __VA_ARGS__); \
  } while (false)

#define COHORT_LOG_TRACE(...) COHORT_LOG_AT(::spdlog::level::trace, __VA_ARGS__)
#define COHORT_LOG_DEBUG(...) COHORT_LOG_AT(::spdlog::level::debug, __VA_ARGS__)
#define COHORT_LOG_INFO(...) COHORT_LOG_AT(::spdlog::level::info, __VA_ARGS__)
#define COHORT_LOG_WARN(...) COHORT_LOG_AT(::spdlog::level::warn, __VA_ARGS__)
#define COHORT_LOG_ERROR(...) COHORT_LOG_AT(::spdlog::level::err, __VA_ARGS__)
