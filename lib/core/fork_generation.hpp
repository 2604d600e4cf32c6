#pragma once

// Which fork of the program this process is: state made before a fork() (an op in flight, a
// communicator's threads) is the parent's, and a child that waits on it would wait forever.

#include <cstdint>

namespace cohort {

/// 0 in the process the program started as, 1 in a child it forks, 2 in a grandchild, ...
/// (counted by a pthread_atfork child handler, installed when the library loads). Cheap: one
/// relaxed atomic load.
std::uint32_t fork_generation() noexcept;

}  // namespace cohort
