#pragma once

// Looking a store's host up with a deadline. getaddrinfo has none of its own: glibc's DNS client
// waits resolv.conf's timeout × attempts for each server, an NSS module as long as it likes, so
// a name service that does not answer would hold a rank far beyond the timeout it was given.

#include <netdb.h>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

namespace cohort::bootstrap {

/// A getaddrinfo result (freed with its last holder; one answer may serve several callers).
using AddressList = std::shared_ptr<const addrinfo>;

/// Whether `host` is an IPv4 or IPv6 literal (parsed without the name service).
bool is_numeric_address(const std::string& host);

/// The TCP addresses of host:port to connect to, known by `deadline`.
///  * A numeric address (an IPv4 or IPv6 literal) is parsed on the calling thread, without the
///    name service: it can neither block nor fail for want of DNS.
///  * A name is looked up on a helper thread that the caller waits for until `deadline`. A lookup
///    still running then is left to finish on its own. A later call for the same host and port
///    joins it rather than starting another (for 30 s after it started), and uses its answer
///    for 30 s after it came (until forget_stream_addresses): a caller retrying with deadlines
///    shorter than the name service takes still gets an answer, and a slow name service is
///    asked once, not once per attempt.
/// Throws:
///  * Error(Timeout) when `deadline` passes before the name service answers;
///  * Error(SystemError) for a failure that may pass (EAI_AGAIN: no answer from the name server
///    within its own timeout, or SERVFAIL; EAI_MEMORY; EAI_SYSTEM), which a caller that retries
///    until its own deadline should retry;
///  * Error(InvalidArgument) when the name does not exist or has no TCP address (EAI_NONAME and
///    the rest). Whether to wait for it to appear is the caller's choice: TcpStore does (a
///    job's first node may enter DNS only once it runs), store_bind_address does not.
/// Thread-safe. A failed lookup is reported to the callers waiting for it; the next call asks
/// again.
AddressList lookup_stream_addresses(const std::string& host, std::uint16_t port,
                                    std::chrono::steady_clock::time_point deadline);

/// Drops the answer kept for host:port if it is still `failed` and at least 2 s old (a lookup
/// still running, a newer answer another caller got meanwhile, or a fresh one is left alone):
/// the addresses it gave did not connect, and the name may have moved since. The age keeps a
/// client retrying a server that is not up yet from asking the name service at every retry.
void forget_stream_addresses(const std::string& host, std::uint16_t port,
                             const AddressList& failed);

}  // namespace cohort::bootstrap
