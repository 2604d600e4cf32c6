#pragma once

// A TCP port nobody on this host listens on, for a server that is not ours to start: the
// MASTER_PORT cohort-run gives ranks is where torch.distributed's rank 0 binds a store of its own
// (cohort's store has a port of its own, COHORT_STORE_PORT).

#include <cstdint>

namespace cohort::launcher {

/// A port the kernel would hand out for the wildcard address (dual-stack IPv6 when this host has
/// IPv6, IPv4's otherwise), so no address of this host has it bound now. Nothing keeps it free:
/// the caller's ranks bind it soon after, the way torchrun's --standalone does. Throws
/// Error(SystemError) when no socket can be bound at all.
std::uint16_t unused_tcp_port();

}  // namespace cohort::launcher
