#pragma once

// TCP plumbing shared by the store server, its client and the rendezvous: resolving and
// formatting endpoints, listening, connecting with a deadline, and deadline-bounded blocking I/O
// on non-blocking sockets. Every errno goes through system_error().

#include "core/unique_fd.hpp"

#include <netdb.h>
#include <sys/socket.h>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

namespace cohort::bootstrap {

using Deadline = std::chrono::steady_clock::time_point;

/// "host:port", or "[host]:port" when host is an IPv6 literal.
std::string format_endpoint(const std::string& host, std::uint16_t port);

/// The numeric address and port of a socket address.
std::string numeric_host(const sockaddr* address, socklen_t length);
std::uint16_t address_port(const sockaddr* address);
/// True for 127.0.0.0/8, ::1 and IPv4-mapped loopback.
bool is_loopback(const sockaddr* address);

/// The address a job's store server binds, so that it listens where its clients are told to
/// connect rather than on every interface. `advertised` is that address (empty when clients learn
/// it another way); `num_nodes` the nodes the job spans.
///  * No address: loopback on one node. On several, the first non-loopback address this host's
///    name resolves to, or the wildcard when there is none (Debian maps the name to 127.0.1.1).
///  * A loopback literal, or any loopback address on one node: bound as given.
///  * A name that resolves to loopback here on a job of several nodes (the Debian mapping again:
///    the other nodes resolve it to a real interface): the wildcard of its family.
///  * Otherwise the first address it resolves to that is this host's; when none is (NAT, a
///    forwarded port, a virtual address), the wildcard of its family, with a warning.
/// `advertised` (or this host's name) is looked up within the store timeout
/// (default_store_timeout()). Throws Error(InvalidArgument) when `advertised` does not exist;
/// when the name service fails otherwise (slow, or a failure that may pass), the wildcard, with
/// a warning.
std::string store_bind_address(const std::string& advertised, int num_nodes);

/// True for "0.0.0.0" and "::".
bool is_wildcard_address(const std::string& host);

/// A non-blocking listening socket bound to host:port (port 0 picks one). Throws
/// Error(SystemError) naming addr:port and errno when no resolved address can be bound.
UniqueFd listen_on(const std::string& host, std::uint16_t port);

/// One attempt to connect to each of `addresses` (lookup_stream_addresses), in order, each
/// bounded by an equal share of the time left before `deadline` and by 5 s (the caller retries).
/// Returns a connected non-blocking socket with TCP_NODELAY, or throws the last error naming
/// `endpoint`: Error(RemoteError) when it was a refusal (nobody listens). A socket that connected
/// to itself counts as refused (see connected_to_itself).
UniqueFd connect_once(const addrinfo* addresses, const std::string& endpoint, Deadline deadline);

/// Whether connected socket `fd`'s two ends are one address and port. Connecting to a local port
/// nobody listens on can give that: when the kernel picks that same port as the source (it is
/// in the ephemeral range when a server that had it closed), TCP's simultaneous open connects
/// the socket to itself, and the client would read its own frames as the server's replies.
bool connected_to_itself(int fd);

/// Makes `fd` non-blocking and close-on-exec.
void set_nonblocking(int fd);
void set_no_delay(int fd);

/// Writes all `size` bytes or throws: Error(Timeout) when `deadline` passes, Error(RemoteError)
/// when the peer went away. `what` names the peer in messages.
void send_all(int fd, const void* data, std::size_t size, Deadline deadline,
              const std::string& what);
/// Reads exactly `size` bytes or throws as send_all (EOF is RemoteError).
void recv_exact(int fd, void* data, std::size_t size, Deadline deadline, const std::string& what);

/// Milliseconds from now until `deadline`, clamped to [0, INT_MAX] for poll().
int poll_timeout_ms(Deadline deadline);

}  // namespace cohort::bootstrap
