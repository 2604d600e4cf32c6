#pragma once

// What a rank holds from the kernel, sampled from /proc/self, so the soak can tell that thousands
// of ops and hundreds of created and destroyed sub-communicators leave nothing behind: open file
// descriptors, memfd segments (cohort's shared arena is a memfd, mapped by every rank of a
// communicator; UCX may use memfds too), and threads.

#include <string>

namespace cohort::soak {

struct ProcessResources {
  /// Open file descriptors (entries of /proc/self/fd, not counting the one used to list them).
  int fds = 0;
  /// Of those, descriptors of memfds ("/memfd:..." links).
  int memfd_fds = 0;
  /// Mappings of memfds in /proc/self/maps (a segment mapped once is one line).
  int memfd_mappings = 0;
  /// Threads (entries of /proc/self/task).
  int threads = 0;
};

/// Samples this process. Throws std::runtime_error when /proc cannot be read.
ProcessResources sample_resources();

/// "fds=12 memfd_fds=0 memfd_mappings=1 threads=4".
std::string to_string(const ProcessResources& r);

}  // namespace cohort::soak
