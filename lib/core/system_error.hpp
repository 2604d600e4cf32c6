#pragma once

// The one place errno values become cohort errors.

#include <cohort/error.hpp>

#include <string>

namespace cohort {

/// Error(SystemError) whose message is "<what>: <strerror(err)> (errno <err>)". Connection
/// resets and broken pipes become RemoteError: they mean the other side went away.
Error system_error(const std::string& what, int err);

}  // namespace cohort
