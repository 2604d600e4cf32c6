#pragma once

// Memory shared by the processes of one host: an anonymous memfd, mapped by the others through
// /proc/<pid>/fd/<fd> of the process that created it, so nothing is left behind in /dev/shm when
// a job dies. The shared arena (one segment per communicator) and the fastboxes (one inbox per
// process) are built on it. Failures are logged at debug level with `what` ("shared arena") and
// reported as -1 / nullptr: callers agree with their peers to do without.

#include <cstddef>
#include <string>

#include <sys/types.h>

namespace cohort::transport::shared_segment {

/// A new, empty memfd (close-on-exec), or -1 when the kernel refuses.
int create(const char* name, const char* what) noexcept;
/// Sizes segment `fd` to `bytes` and maps it shared; nullptr on failure (`fd` stays open).
void* size_and_map(int fd, std::size_t bytes, const char* what) noexcept;
/// Where another process of this host finds descriptor `fd` of process `pid`.
std::string proc_path(pid_t pid, int fd);
/// Maps the first `bytes` of the segment at `where` (a proc_path), once it is at least that
/// large: a segment its owner has not sized would fault on first touch instead of failing here.
/// nullptr on failure. The descriptor opened for it is closed again; the mapping keeps the
/// segment.
void* map_existing(const std::string& where, std::size_t bytes, const char* what) noexcept;

}  // namespace cohort::transport::shared_segment
