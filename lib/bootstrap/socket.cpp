#include "bootstrap/socket.hpp"

#include <cohort/error.hpp>
#include <cohort/store.hpp>

#include "bootstrap/name_lookup.hpp"
#include "core/log.hpp"
#include "core/system_error.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>
#include <cerrno>
#include <climits>
#include <cstring>
#include <memory>

namespace cohort::bootstrap {

namespace {

// The addresses to bind for host:port (the wildcard of every family when `host` is empty). A
// server binds a literal or a name of this host, which the name service answers from
// /etc/hosts: no deadline here (connecting goes through lookup_stream_addresses).
AddressList resolve_to_bind(const std::string& host, std::uint16_t port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | AI_PASSIVE;
  addrinfo* result = nullptr;
  const std::string service = std::to_string(port);
  const int rc =
      getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &result);
  if (rc != 0) {
    if (rc == EAI_SYSTEM) throw system_error("resolve " + format_endpoint(host, port), errno);
    throw Error(ErrorCode::InvalidArgument,
                "cannot resolve store host '" + host + "': " + gai_strerror(rc));
  }
  return AddressList(result, freeaddrinfo);
}

UniqueFd make_socket(int family) {
  UniqueFd fd(::socket(family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd) throw system_error("socket()", errno);
  return fd;
}

}  // namespace

std::string format_endpoint(const std::string& host, std::uint16_t port) {
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

std::string numeric_host(const sockaddr* address, socklen_t length) {
  char text[NI_MAXHOST] = {};
  if (getnameinfo(address, length, text, sizeof text, nullptr, 0, NI_NUMERICHOST) != 0) return "?";
  return text;
}

std::uint16_t address_port(const sockaddr* address) {
  if (address->sa_family == AF_INET6)
    return ntohs(reinterpret_cast<const sockaddr_in6*>(address)->sin6_port);
  return ntohs(reinterpret_cast<const sockaddr_in*>(address)->sin_port);
}

bool is_loopback(const sockaddr* address) {
  if (address->sa_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(address);
    return (ntohl(v4->sin_addr.s_addr) >> 24) == 127;
  }
  if (address->sa_family == AF_INET6) {
    const in6_addr& a = reinterpret_cast<const sockaddr_in6*>(address)->sin6_addr;
    if (IN6_IS_ADDR_LOOPBACK(&a)) return true;
    return IN6_IS_ADDR_V4MAPPED(&a) && a.s6_addr[12] == 127;
  }
  return false;
}

namespace {

const char* wildcard_for(int family) {
  return family == AF_INET6 ? "::" : "0.0.0.0";
}

// Whether `address` belongs to this host: binding it (on any free port) works.
bool is_own_address(const addrinfo& address) {
  UniqueFd fd(::socket(address.ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) return false;
  sockaddr_storage any_port{};
  std::memcpy(&any_port, address.ai_addr, address.ai_addrlen);
  if (address.ai_family == AF_INET6)
    reinterpret_cast<sockaddr_in6*>(&any_port)->sin6_port = 0;
  else
    reinterpret_cast<sockaddr_in*>(&any_port)->sin_port = 0;
  return ::bind(fd.get(), reinterpret_cast<const sockaddr*>(&any_port), address.ai_addrlen) == 0;
}

}  // namespace

std::string store_bind_address(const std::string& advertised, int num_nodes) {
  if (advertised.empty() && num_nodes <= 1) return "127.0.0.1";
  std::string host = advertised;
  if (host.empty()) {
    char name[256] = {};
    if (::gethostname(name, sizeof name - 1) != 0) return "0.0.0.0";
    host = name;
  }
  AddressList list;
  try {
    // Bounded like any wait of the store: a name service that does not answer must not hold
    // rank 0 (or cohort-run's node 0) for good.
    list = lookup_stream_addresses(host, 0, Clock::now() + default_store_timeout());
  } catch (const Error& e) {
    // A name that does not exist was mistyped; our own name not resolving means the other nodes
    // cannot use it either. Any other failure (a name service that is slow or failing for now)
    // leaves the wildcard, which serves whichever address the clients were told.
    if (!advertised.empty() && e.code() == ErrorCode::InvalidArgument) throw;
    if (!advertised.empty())
      COHORT_LOG_WARN("store: cannot look '{}' up here ({}); binding every interface", host,
                      e.message());
    return "0.0.0.0";
  }
  const addrinfo* first = list.get();
  bool all_loopback = true;
  for (const addrinfo* ai = first; ai; ai = ai->ai_next) all_loopback &= is_loopback(ai->ai_addr);
  if (all_loopback) {
    if (!advertised.empty() && (num_nodes <= 1 || is_numeric_address(advertised)))
      return advertised;
    COHORT_LOG_INFO(
        "store: '{}' resolves to loopback on this host but the job spans {} nodes; binding every "
        "interface (the token keeps strangers out)",
        host, num_nodes);
    return wildcard_for(first->ai_family);
  }
  for (const addrinfo* ai = first; ai; ai = ai->ai_next)
    if (!is_loopback(ai->ai_addr) && is_own_address(*ai))
      return numeric_host(ai->ai_addr, ai->ai_addrlen);
  COHORT_LOG_WARN(
      "store: '{}' is not an address of this host (NAT or a forwarded port?); binding every "
      "interface (the token keeps strangers out)",
      host);
  return wildcard_for(first->ai_family);
}

bool is_wildcard_address(const std::string& host) {
  return host == "0.0.0.0" || host == "::";
}

void set_nonblocking(int fd) {
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0)
    throw system_error("fcntl(O_NONBLOCK)", errno);
  if (::fcntl(fd, F_SETFD, FD_CLOEXEC) < 0) throw system_error("fcntl(FD_CLOEXEC)", errno);
}

void set_no_delay(int fd) {
  const int one = 1;
  // Store requests are tiny round trips; Nagle would add tens of milliseconds to each.
  if (::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0)
    throw system_error("setsockopt(TCP_NODELAY)", errno);
}

UniqueFd listen_on(const std::string& host, std::uint16_t port) {
  const AddressList list = resolve_to_bind(host, port);
  int last_errno = 0;
  std::string last_address = format_endpoint(host, port);
  for (const addrinfo* ai = list.get(); ai; ai = ai->ai_next) {
    UniqueFd fd = make_socket(ai->ai_family);
    const int one = 1;
    // A restarted job can rebind its port while old connections sit in TIME_WAIT.
    ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    last_address = format_endpoint(numeric_host(ai->ai_addr, ai->ai_addrlen), port);
    if (::bind(fd.get(), ai->ai_addr, ai->ai_addrlen) != 0 || ::listen(fd.get(), SOMAXCONN) != 0) {
      last_errno = errno;
      continue;
    }
    return fd;
  }
  throw system_error("store server cannot bind " + last_address, last_errno);
}

namespace {
/// The longest one address's connect may take before the next is tried: a TCP handshake over any
/// working path ends well within it (SYN retransmits at 1 and 3 s).
constexpr std::chrono::seconds kConnectAttempt{5};
}  // namespace

UniqueFd connect_once(const addrinfo* addresses, const std::string& endpoint, Deadline deadline) {
  int last_errno = ECONNREFUSED;
  std::size_t untried = 0;
  for (const addrinfo* ai = addresses; ai; ai = ai->ai_next) ++untried;
  for (const addrinfo* ai = addresses; ai; ai = ai->ai_next, --untried) {
    // Each address gets an equal share of the time left, and at most kConnectAttempt: one that
    // silently drops packets (a filtered IPv6 address) must not spend the deadline before the
    // others are tried, on this attempt or the caller's next ones (a server not up yet refuses
    // the working address until it is).
    const auto now = std::chrono::steady_clock::now();
    Deadline mine = deadline;
    if (deadline > now) {
      const auto share = (deadline - now) / static_cast<std::chrono::steady_clock::rep>(untried);
      mine = now + std::min<std::chrono::steady_clock::duration>(share, kConnectAttempt);
    }
    UniqueFd fd = make_socket(ai->ai_family);
    if (::connect(fd.get(), ai->ai_addr, ai->ai_addrlen) != 0) {
      if (errno != EINPROGRESS) {
        last_errno = errno;
        continue;
      }
      pollfd pfd{fd.get(), POLLOUT, 0};
      int ready;
      while ((ready = ::poll(&pfd, 1, poll_timeout_ms(mine))) < 0 && errno == EINTR) {
      }
      if (ready <= 0) {
        last_errno = ready == 0 ? ETIMEDOUT : errno;
        continue;
      }
      int err = 0;
      socklen_t len = sizeof err;
      ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
      if (err != 0) {
        last_errno = err;
        continue;
      }
    }
    if (connected_to_itself(fd.get())) {
      last_errno = ECONNREFUSED;  // nobody listens there: retried like a refusal
      continue;
    }
    set_no_delay(fd.get());
    return fd;
  }
  const Error failure = system_error("connect to store at " + endpoint, last_errno);
  // Refused: nobody listens there (yet, or any more); the caller decides which.
  if (last_errno == ECONNREFUSED) throw Error(ErrorCode::RemoteError, failure.message());
  throw failure;
}

bool connected_to_itself(int fd) {
  sockaddr_storage local{}, peer{};
  socklen_t local_length = sizeof local, peer_length = sizeof peer;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_length) != 0 ||
      ::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_length) != 0)
    return false;  // not connected after all: the first exchange will say so
  return local_length == peer_length && std::memcmp(&local, &peer, local_length) == 0;
}

int poll_timeout_ms(Deadline deadline) {
  const auto left =
      std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
  if (left.count() <= 0) return 0;
  return left.count() > INT_MAX ? INT_MAX : static_cast<int>(left.count());
}

namespace {
// Waits until `fd` is ready for `events` or throws Timeout once `deadline` passes.
void wait_ready(int fd, short events, Deadline deadline, const std::string& what) {
  for (;;) {
    pollfd pfd{fd, events, 0};
    const int ready = ::poll(&pfd, 1, poll_timeout_ms(deadline));
    if (ready > 0) return;
    if (ready < 0 && errno != EINTR) throw system_error("poll on " + what, errno);
    if (ready == 0 && std::chrono::steady_clock::now() >= deadline)
      throw Error(ErrorCode::Timeout,
                  "no progress on the connection to " + what + " before the deadline");
  }
}
}  // namespace

void send_all(int fd, const void* data, std::size_t size, Deadline deadline,
              const std::string& what) {
  const auto* bytes = static_cast<const std::uint8_t*>(data);
  while (size > 0) {
    const ssize_t sent = ::send(fd, bytes, size, MSG_NOSIGNAL);
    if (sent > 0) {
      bytes += sent;
      size -= static_cast<std::size_t>(sent);
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      wait_ready(fd, POLLOUT, deadline, what);
    } else if (errno != EINTR) {
      throw system_error("send to " + what, errno);
    }
  }
}

void recv_exact(int fd, void* data, std::size_t size, Deadline deadline, const std::string& what) {
  auto* bytes = static_cast<std::uint8_t*>(data);
  while (size > 0) {
    const ssize_t got = ::recv(fd, bytes, size, 0);
    if (got > 0) {
      bytes += got;
      size -= static_cast<std::size_t>(got);
    } else if (got == 0) {
      throw Error(ErrorCode::RemoteError, what + " closed the connection");
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      wait_ready(fd, POLLIN, deadline, what);
    } else if (errno != EINTR) {
      throw system_error("recv from " + what, errno);
    }
  }
}

}  // namespace cohort::bootstrap
