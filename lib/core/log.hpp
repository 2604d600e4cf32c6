#pragma once

// cohort's one logger. Lines go to stderr as "[cohort r<rank>/<size>] <level>: <message>".
// Use the macros so disabled levels cost one comparison and no formatting.

#include <spdlog/spdlog.h>

namespace cohort::log {

/// The shared logger, created on first use with the level from COHORT_LOG_LEVEL.
spdlog::logger& logger();

/// Sets the level from the current tunables' COHORT_LOG_LEVEL (after reload_tunables(), so a
/// level set in-process before init() counts), unless set_log_level() has chosen one.
void apply_level_from_tunables();

}  // namespace cohort::log

#define COHORT_LOG_TRACE(...) ::cohort::log::logger().trace(__VA_ARGS__)
#define COHORT_LOG_DEBUG(...) ::cohort::log::logger().debug(__VA_ARGS__)
#define COHORT_LOG_INFO(...) ::cohort::log::logger().info(__VA_ARGS__)
#define COHORT_LOG_WARN(...) ::cohort::log::logger().warn(__VA_ARGS__)
#define COHORT_LOG_ERROR(...) ::cohort::log::logger().error(__VA_ARGS__)
