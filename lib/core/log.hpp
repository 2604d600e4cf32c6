#pragma once

// cohort's one logger. Lines go to stderr as "[cohort r<rank>/<size>] <level>: <message>".
// Use the macros so disabled levels cost one comparison and no formatting.
//
// This header needs fmt's core only: 44 of the library's files include it, and with spdlog's
// headers and its templated logging in each call site (as it was until 2026-12-02) seven of
// them, compiled one at a time at -O3, took 53-61 s instead of 27-32 (dispatch.cpp 5.1-7.0 s
// instead of 1.7-2.2). Formatting happens once, in log.cpp, behind write_args. spdlog stays
// behind log.cpp too; what needs its own types (a sink of its own, a test that reads the lines)
// includes core/log_sink.hpp.

#include <fmt/core.h>

namespace cohort::log {

/// A line's level, numbered as spdlog's (log.cpp checks that they agree).
enum class Level : int { Trace = 0, Debug, Info, Warn, Error, Critical, Off };

/// Whether a line at `level` is written now: one load and one comparison.
bool enabled(Level level) noexcept;

/// Formats one line and writes it at `level` (the logger adds the prefix). Never throws: a line
/// that cannot be formatted or written is lost, as spdlog's own error handler would have it.
void write_args(Level level, fmt::string_view format, fmt::format_args args) noexcept;

/// The same, its format string checked at compile time. The formatting itself is not a
/// template: each call site instantiates only the argument list.
template <class... Args>
void write(Level level, fmt::format_string<Args...> format, Args&&... args) noexcept {
  write_args(level, format, fmt::make_format_args(args...));
}

/// Sets the level from the current tunables' COHORT_LOG_LEVEL (after reload_tunables(), so a
/// level set in-process before init() counts), unless set_log_level() has chosen one.
void apply_level_from_tunables();

}  // namespace cohort::log

// The level is checked before the arguments are evaluated: a disabled line costs one call, one
// load and one comparison, even when its arguments call functions (algorithm_name(), ...).
#define COHORT_LOG_AT(level, ...)                                                \
  do {                                                                           \
    if (::cohort::log::enabled(level)) ::cohort::log::write(level, __VA_ARGS__); \
  } while (false)

#define COHORT_LOG_TRACE(...) COHORT_LOG_AT(::cohort::log::Level::Trace, __VA_ARGS__)
#define COHORT_LOG_DEBUG(...) COHORT_LOG_AT(::cohort::log::Level::Debug, __VA_ARGS__)
#define COHORT_LOG_INFO(...) COHORT_LOG_AT(::cohort::log::Level::Info, __VA_ARGS__)
#define COHORT_LOG_WARN(...) COHORT_LOG_AT(::cohort::log::Level::Warn, __VA_ARGS__)
#define COHORT_LOG_ERROR(...) COHORT_LOG_AT(::cohort::log::Level::Error, __VA_ARGS__)
