#include "launch/free_port.hpp"

#include "core/system_error.hpp"
#include "core/unique_fd.hpp"

#include <cerrno>

#include <netinet/in.h>
#include <sys/socket.h>

namespace cohort::launcher {
namespace {

// The port `fd`, bound to port 0 of `address`, was given; 0 when it could not be bound.
std::uint16_t bound_port(int fd, const sockaddr* address, socklen_t length) {
  if (::bind(fd, address, length) != 0) return 0;
  sockaddr_storage local{};
  socklen_t local_length = sizeof local;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_length) != 0) return 0;
  return local.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&local)->sin6_port)
                                     : ntohs(reinterpret_cast<sockaddr_in*>(&local)->sin_port);
}

}  // namespace

std::uint16_t unused_tcp_port() {
  // IPv6's wildcard with IPV6_V6ONLY off takes the port on IPv4's too, so a port it gets is free
  // on every address of either family (torch's store listens on the wildcard).
  if (UniqueFd fd(::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0)); fd) {
    const int off = 0;
    sockaddr_in6 any{};
    any.sin6_family = AF_INET6;
    any.sin6_addr = in6addr_any;
    if (::setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof off) == 0)
      if (const std::uint16_t port =
              bound_port(fd.get(), reinterpret_cast<const sockaddr*>(&any), sizeof any))
        return port;
  }
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) throw system_error("socket(AF_INET) to find an unused port", errno);
  sockaddr_in any{};
  any.sin_family = AF_INET;
  any.sin_addr.s_addr = htonl(INADDR_ANY);
  if (const std::uint16_t port =
          bound_port(fd.get(), reinterpret_cast<const sockaddr*>(&any), sizeof any))
    return port;
  throw system_error("bind(0.0.0.0:0) to find an unused port", errno);
}

}  // namespace cohort::launcher
