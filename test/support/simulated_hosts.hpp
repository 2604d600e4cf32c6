#pragma once

// Hosts simulated on one machine for multi-process tests: a rank that enters a UTS namespace of
// its own and takes its "host"'s hostname gets a host identity of its own
// (transport/host_identity.hpp), so ranks on different simulated hosts reach each other as if on
// separate machines (UCX over TCP, no shared arena) while running here. Needs CAP_SYS_ADMIN.

namespace cohort::test {

/// Whether this process may create UTS namespaces (tried once in a forked child, so this
/// process is untouched). Tests that need it exit 77 (meson: SKIP) without.
bool can_simulate_hosts();

/// Moves the calling process to simulated host `host` (a new UTS namespace, hostname
/// "cohort-simhost-<host>"). Throws std::runtime_error when the kernel refuses.
void become_simulated_host(int host);

}  // namespace cohort::test
