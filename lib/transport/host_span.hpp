#pragma once

// Whether a world's ranks sit on one host or several, agreed through the bootstrap store before
// any transport exists: the UCX context is configured by it (ucx/ucx_context.hpp), and a context
// must exist before a rank can publish its transport address, so this cannot wait for the
// addresses (which carry each rank's host identity).

#include <cohort/store.hpp>

#include <chrono>
#include <string>

namespace cohort::transport {

/// True on every rank alike when the `size` ranks calling this with the same `prefix` have more
/// than one host identity among them (host_identity.hpp). A constant number of store operations
/// per rank whatever the size: the first identity to arrive is kept, each rank that differs from
/// it counts itself, and the last rank to arrive publishes the verdict, which the others wait for
/// until `timeout` (then Error(Timeout) saying how many ranks arrived). A size of 1 asks nothing.
/// The keys stay until forget_host_span; every rank must have returned from here first. A
/// prefix serves one world once: a later world under the same prefix could meet the keys of an
/// earlier one not yet forgotten (worlds take fresh ids, so their prefixes differ).
bool ranks_span_hosts(Store& store, const std::string& prefix, const std::string& identity,
                      int size, std::chrono::milliseconds timeout);

/// Erases what ranks_span_hosts left under `prefix`. Called by one rank once every rank has
/// returned from ranks_span_hosts (e.g. after an exchange that every rank enters only then).
void forget_host_span(Store& store, const std::string& prefix);

}  // namespace cohort::transport
