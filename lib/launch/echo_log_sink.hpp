#pragma once

// Sends the launcher's own log lines (a flight record missing, a store that stopped answering,
// a second Ctrl-C) through the terminal echo its ranks' output goes through: a terminal that
// stopped reading must not block the launcher's warnings either, and the lines keep their place
// among the ranks' lines.

namespace cohort::launcher {

/// From now on cohort's log lines go to the echo of `fd` (TerminalEcho::shared), in the same
/// format. Call at the launcher's start, before it starts threads. The echo is flushed as lines
/// come and at the job's end, within the echo's bounds.
void log_through_terminal_echo(int fd);

}  // namespace cohort::launcher
