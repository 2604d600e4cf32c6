#pragma once

/// Logging control. cohort logs through one logger whose lines start with
/// "[cohort r<rank>/<size>]"; the level comes from COHORT_LOG_LEVEL (trace, debug, info, warn,
/// error, off; default warn) unless set here.

#include <string_view>

namespace cohort {

enum class LogLevel { Trace, Debug, Info, Warn, Error, Off };

/// Overrides COHORT_LOG_LEVEL for this process.
void set_log_level(LogLevel level);
/// Parses "trace" ... "off"; throws Error(InvalidArgument) naming the text otherwise.
LogLevel log_level_from_name(std::string_view name);
/// Sets the rank/size shown in the prefix (init() does this for you).
void set_log_rank(int rank, int size);

}  // namespace cohort
