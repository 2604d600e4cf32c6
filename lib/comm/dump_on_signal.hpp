#pragma once

// SIGUSR1 -> a dump of every live flight recorder that has a trace directory. Process-wide by
// nature (a signal has one disposition per process), so this is the one piece of global state
// the recorders share.
//
// How: the first recorder registered installs a handler, unless SIGUSR1 already has one (the
// application's wins: cohort never takes a signal away from it). The handler only write()s a byte
// to a pipe, which is async-signal-safe; a thread started with the handler reads the pipe and
// writes the dumps, which involves formatting, allocation and file I/O that a handler must not
// do. The thread blocks every signal and lives as long as the process.
//
// fork(): the child has neither the thread nor the parent's recorders; the first recorder the
// child registers starts a thread of its own (the handler stays installed across fork).

namespace cohort::comm {

class FlightRecorder;

/// Adds `recorder` to the recorders SIGUSR1 dumps (installing the handler and starting the thread
/// on first use). Never throws: when the handler cannot be installed, dumps then happen on
/// failure and on request only, and the reason is logged once.
void dump_on_signal(const FlightRecorder* recorder) noexcept;

/// Removes `recorder`; returns once no dump of it is under way.
void stop_dumping_on_signal(const FlightRecorder* recorder) noexcept;

}  // namespace cohort::comm
