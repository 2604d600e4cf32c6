#include <cohort/error.hpp>
#include <cohort/log.hpp>

#include "core/log_sink.hpp"
#include "core/tunables.hpp"

#include <fmt/format.h>
#include <spdlog/sinks/stdout_sinks.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>

namespace cohort {
namespace {

spdlog::level::level_enum to_spdlog(LogLevel level) {
  switch (level) {
    case LogLevel::Trace: return spdlog::level::trace;
    case LogLevel::Debug: return spdlog::level::debug;
    case LogLevel::Info: return spdlog::level::info;
    case LogLevel::Warn: return spdlog::level::warn;
    case LogLevel::Error: return spdlog::level::err;
    case LogLevel::Off: return spdlog::level::off;
  }
  return spdlog::level::warn;
}

std::string pattern_for(int rank, int size) {
  if (rank < 0) return "[cohort] %l: %v";
  return "[cohort r" + std::to_string(rank) + "/" + std::to_string(size) + "] %l: %v";
}

// The pattern in use, for a sink that replaces the first (log::send_to). Function-local: the
// logger may be built by another file's static initialiser. The mutex is constant-initialised.
std::mutex pattern_mutex;
std::string& current_pattern() {
  static std::string pattern = pattern_for(-1, 0);
  return pattern;
}

void use_pattern(spdlog::logger& logger, std::string pattern) {
  std::lock_guard lock(pattern_mutex);
  current_pattern() = std::move(pattern);
  logger.set_pattern(current_pattern());
}

// Set once set_log_level() has chosen the level, which COHORT_LOG_LEVEL then no longer changes.
std::atomic<bool> level_chosen_by_caller{false};

// Built once; spdlog loggers are thread-safe (_mt sink).
std::shared_ptr<spdlog::logger> make_logger() {
  auto logger =
      std::make_shared<spdlog::logger>("cohort", std::make_shared<spdlog::sinks::stderr_sink_mt>());
  logger->set_pattern(current_pattern());  // built before anyone can change it: no lock
  // The logger may be created before init() (by any first log line) and must not throw: with a
  // malformed tunable it logs at the default level, says why, and init() then fails naming it.
  LogLevel level = LogLevel::Warn;
  try {
    level = tunables().log_level;
  } catch (const Error& e) {
    logger->warn("{}; logging at warn until that is fixed", e.message());
  }
  logger->set_level(to_spdlog(level));
  logger->flush_on(spdlog::level::warn);
  return logger;
}

}  // namespace

namespace log {
static_assert(static_cast<int>(Level::Trace) == spdlog::level::trace &&
              static_cast<int>(Level::Debug) == spdlog::level::debug &&
              static_cast<int>(Level::Info) == spdlog::level::info &&
              static_cast<int>(Level::Warn) == spdlog::level::warn &&
              static_cast<int>(Level::Error) == spdlog::level::err &&
              static_cast<int>(Level::Critical) == spdlog::level::critical &&
              static_cast<int>(Level::Off) == spdlog::level::off);

spdlog::logger& logger() {
  static const std::shared_ptr<spdlog::logger> instance = make_logger();
  return *instance;
}

bool enabled(Level level) noexcept {
  return logger().should_log(static_cast<spdlog::level::level_enum>(level));
}

void write_args(Level level, fmt::string_view format, fmt::format_args args) noexcept {
  try {
    fmt::memory_buffer line;  // a line of up to 500 bytes allocates nothing
    fmt::vformat_to(fmt::appender(line), format, args);
    // spdlog catches what its sinks throw and reports it through its error handler.
    logger().log(static_cast<spdlog::level::level_enum>(level),
                 fmt::string_view(line.data(), line.size()));
  } catch (...) {
    // Out of memory formatting it: the line is lost, the caller goes on.
  }
}

void send_to(std::shared_ptr<spdlog::sinks::sink> sink) {
  spdlog::logger& target = logger();  // built first: its construction reads the pattern
  std::lock_guard lock(pattern_mutex);
  sink->set_pattern(current_pattern());
  target.sinks().assign({std::move(sink)});
}

void apply_level_from_tunables() {
  if (level_chosen_by_caller.load(std::memory_order_relaxed)) return;
  logger().set_level(to_spdlog(tunables().log_level));
}
}  // namespace log

void set_log_level(LogLevel level) {
  level_chosen_by_caller.store(true, std::memory_order_relaxed);
  log::logger().set_level(to_spdlog(level));
}

LogLevel log_level_from_name(std::string_view name) {
  if (name == "trace") return LogLevel::Trace;
  if (name == "debug") return LogLevel::Debug;
  if (name == "info") return LogLevel::Info;
  if (name == "warn" || name == "warning") return LogLevel::Warn;
  if (name == "error") return LogLevel::Error;
  if (name == "off") return LogLevel::Off;
  throw Error(ErrorCode::InvalidArgument,
              "unknown log level '" + std::string(name) +
                  "' (expected trace, debug, info, warn, error or off)");
}

void set_log_rank(int rank, int size) {
  use_pattern(log::logger(), pattern_for(rank, size));
}

}  // namespace cohort
