#pragma once

// Speaking (or abusing) the TcpStore wire format by hand, for the server tests: a plain blocking
// IPv4 socket and the frames of lib/bootstrap/store_protocol.hpp built byte by byte, so the tests
// do not trust the code under test to encode them.

#include <cohort/store.hpp>

#include "support/poll_deadline.hpp"

#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>
#include <chrono>
#include <cstdint>
#include <string_view>

namespace cohort::test {

// A plain blocking IPv4 socket connected to 127.0.0.1:port.
class RawSocket {
 public:
  explicit RawSocket(std::uint16_t port) : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    REQUIRE(fd_ >= 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(port);
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
  }
  ~RawSocket() {
    if (fd_ >= 0) ::close(fd_);
  }
  RawSocket(const RawSocket&) = delete;
  RawSocket& operator=(const RawSocket&) = delete;

  void send_bytes(const Bytes& bytes) {
    REQUIRE(::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) ==
            static_cast<ssize_t>(bytes.size()));
  }
  /// Reads one whole frame the server sent (header, then as much body as the header claims)
  /// and returns its type byte; fails the test when it does not arrive within `timeout`.
  std::uint8_t receive_frame(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    std::uint8_t header[16];
    receive_exactly(header, sizeof header, deadline);
    std::uint64_t body_length = 0;
    for (int i = 0; i < 8; ++i) body_length |= std::uint64_t{header[8 + i]} << (8 * i);
    REQUIRE(body_length < 4096);
    std::uint8_t body[4096];
    receive_exactly(body, body_length, deadline);
    return header[5];
  }
  /// True when the server closed the connection within `timeout` (reading and discarding
  /// whatever it sent first).
  bool closed_by_server(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      pollfd pfd{fd_, POLLIN, 0};
      if (::poll(&pfd, 1, 50) <= 0) continue;
      std::uint8_t sink[4096];
      const ssize_t got = ::recv(fd_, sink, sizeof sink, 0);
      if (got <= 0) return true;
    }
    return false;
  }
  /// True when nothing has arrived, the end of the stream included (a closed connection would
  /// be readable): the server has not closed it, so far.
  bool open_so_far() {
    pollfd pfd{fd_, POLLIN, 0};
    return ::poll(&pfd, 1, 0) == 0;
  }

 private:
  void receive_exactly(std::uint8_t* into, std::size_t size,
                       std::chrono::steady_clock::time_point deadline) {
    while (size > 0) {
      pollfd pfd{fd_, POLLIN, 0};
      REQUIRE(::poll(&pfd, 1, poll_timeout_ms(deadline)) == 1);
      const ssize_t got = ::recv(fd_, into, size, 0);
      REQUIRE(got > 0);
      into += got;
      size -= static_cast<std::size_t>(got);
    }
  }

  int fd_;
};

inline void put_le(Bytes& out, std::uint64_t value, int width) {
  for (int i = 0; i < width; ++i) out.push_back(static_cast<std::uint8_t>(value >> (8 * i)));
}

// A frame header as the wire format defines it: magic, version, type, reserved, body length.
inline Bytes frame_header(std::uint8_t type, std::uint64_t body_length) {
  Bytes header;
  put_le(header, 0x54534843u, 4);
  header.push_back(1);
  header.push_back(type);
  put_le(header, 0, 2);
  put_le(header, body_length, 8);
  return header;
}

inline Bytes field(std::string_view text) {
  Bytes out;
  put_le(out, text.size(), 8);
  out.insert(out.end(), text.begin(), text.end());
  return out;
}

inline Bytes hello_frame(std::string_view token) {
  const Bytes body = field(token);
  Bytes frame = frame_header(1, body.size());
  frame.insert(frame.end(), body.begin(), body.end());
  return frame;
}

}  // namespace cohort::test
