// libFuzzer harness: a real TcpStoreServer fed arbitrary bytes over real loopback connections.
//
// Input: a sequence of records, each
//   u8 selector   bits 0-1: the connection (0-2; 3 means 0), bit 6: half-close that connection
//                 after this chunk
//   u16 length    little-endian, then `length` bytes sent on that connection
// (test/fuzz/make_corpus.py writes such seeds). Each input gets a fresh server (token "fuzz-token",
// 1 KiB values), so inputs do not depend on each other. Replies are read while sending, then
// every connection is half-closed and read to its end.
//
// Invariants:
// - the server answers or hangs up within kDeadline: every connection reaches end of stream
//   after we half-close it (a parked get/wait must notice the hang-up);
// - everything it sends is a sequence of well-formed reply frames (a valid header with a reply
//   type, and the fields that type promises); only the last may be cut short by a drop;
// - after any input, a new client still authenticates and gets an answer (the loop survived).

#include <cohort/log.hpp>
#include <cohort/store.hpp>

#include "bootstrap/name_lookup.hpp"
#include "bootstrap/socket.hpp"
#include "bootstrap/store_protocol.hpp"
#include "fuzz_check.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

using namespace cohort;
using namespace cohort::bootstrap;
using namespace std::chrono_literals;

namespace {

constexpr std::size_t kConnections = 3;
constexpr std::size_t kMaxValueBytes = 1024;
// Far above what any input needs on loopback: passing it means the server stopped answering.
constexpr auto kDeadline = 10s;

struct Client {
  UniqueFd fd;
  Bytes received;
  bool write_closed = false;  // half-closed by us, or the server hung up
  bool ended = false;         // end of stream (or reset) seen
};

// Reads whatever has arrived on `c` without blocking.
void drain(Client& c) {
  std::uint8_t chunk[4096];
  while (!c.ended) {
    const ssize_t got = ::recv(c.fd.get(), chunk, sizeof chunk, 0);
    if (got > 0) {
      c.received.insert(c.received.end(), chunk, chunk + got);
    } else if (got == 0 || errno == ECONNRESET) {
      c.ended = true;
      c.write_closed = true;
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      return;
    } else if (errno != EINTR) {
      FUZZ_REQUIRE(false, std::string("recv from the server: ") + std::strerror(errno));
    }
  }
}

// Polls every open client for input (and `writer` for output room, when given) until something
// happens; aborts past the deadline.
void wait_for_progress(std::vector<Client>& clients, Client* writer, Deadline deadline) {
  std::vector<pollfd> fds;
  std::vector<Client*> owners;
  for (Client& c : clients) {
    if (!c.fd || c.ended) continue;
    short events = POLLIN;
    if (&c == writer) events |= POLLOUT;
    fds.push_back({c.fd.get(), events, 0});
    owners.push_back(&c);
  }
  if (fds.empty()) return;
  const int ready = ::poll(fds.data(), fds.size(), poll_timeout_ms(deadline));
  FUZZ_REQUIRE(ready != 0, "the store server neither read nor answered for " +
                               std::to_string(std::chrono::seconds(kDeadline).count()) + " s");
  if (ready < 0) return;  // EINTR: the caller loops
  for (std::size_t i = 0; i < fds.size(); ++i)
    if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) drain(*owners[i]);
}

void send_chunk(std::vector<Client>& clients, Client& c, std::span<const std::uint8_t> bytes,
                Deadline deadline) {
  std::size_t sent = 0;
  while (sent < bytes.size() && !c.write_closed) {
    const ssize_t n = ::send(c.fd.get(), bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<std::size_t>(n);
    } else if (errno == EPIPE || errno == ECONNRESET) {
      c.write_closed = true;  // the server dropped this client: the rest of its input is moot
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      wait_for_progress(clients, &c, deadline);
    } else if (errno != EINTR) {
      FUZZ_REQUIRE(false, std::string("send to the server: ") + std::strerror(errno));
    }
    drain(c);
  }
}

// The fields each reply type promises (store_protocol.hpp's table).
void check_reply_fields(MessageType type, std::span<const std::uint8_t> body) {
  FieldReader fields(body, kMaxValueBytes);
  switch (type) {
    case MessageType::Ok: break;
    case MessageType::Value: fields.field(); break;
    case MessageType::Integer: fields.integer(); break;
    case MessageType::Missing:
      FUZZ_REQUIRE(!fields.remaining_texts().empty(), "a missing reply names no key");
      break;
    case MessageType::Failure:
      fields.integer();
      fields.text();
      break;
    default:
      FUZZ_REQUIRE(false,
                   std::string("the server sent a request type: ") + message_type_name(type));
  }
  FUZZ_REQUIRE(fields.done(),
               std::string("extra fields in a ") + message_type_name(type) + " reply");
}

void check_replies(const Bytes& stream) {
  std::size_t at = 0;
  while (stream.size() - at >= kFrameHeaderBytes) {
    FrameHeader header{};
    try {
      header = decode_header(stream.data() + at, max_body_bytes(kMaxValueBytes));
    } catch (const Error& e) {
      FUZZ_REQUIRE(false, std::string("the server sent a malformed frame: ") + e.what());
    }
    if (stream.size() - at - kFrameHeaderBytes < header.body_length) return;  // cut by a drop
    try {
      check_reply_fields(header.type,
                         std::span(stream).subspan(at + kFrameHeaderBytes, header.body_length));
    } catch (const Error& e) {
      FUZZ_REQUIRE(false, std::string("the server sent a malformed ") +
                              message_type_name(header.type) + " reply: " + e.what());
    }
    at += kFrameHeaderBytes + header.body_length;
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // Every dropped client is a warning; thousands per second would drown the fuzzer's output.
  set_log_level(LogLevel::Off);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  TcpStoreOptions options;
  options.host = "127.0.0.1";
  options.token = "fuzz-token";
  options.max_value_bytes = kMaxValueBytes;
  TcpStoreServer server(options);
  const Deadline deadline = Clock::now() + kDeadline;
  const auto addresses = lookup_stream_addresses(server.host(), server.port(), deadline);
  const std::string endpoint = format_endpoint(server.host(), server.port());

  std::vector<Client> clients(kConnections);
  fuzz::ByteReader input(data, size);
  while (!input.empty()) {
    const std::uint8_t selector = input.u8();
    const std::size_t length = input.u16();
    const auto chunk = input.take(length);
    Client& c = clients[(selector & 3u) % kConnections];
    if (!c.fd) c.fd = connect_once(addresses.get(), endpoint, deadline);
    send_chunk(clients, c, chunk, deadline);
    if ((selector & 0x40u) && !c.write_closed) {
      ::shutdown(c.fd.get(), SHUT_WR);
      c.write_closed = true;
    }
  }
  for (Client& c : clients) {
    if (c.fd && !c.write_closed) ::shutdown(c.fd.get(), SHUT_WR);
    c.write_closed = true;
  }
  for (;;) {
    bool open = false;
    for (Client& c : clients) {
      if (!c.fd) continue;
      drain(c);
      open = open || !c.ended;
    }
    if (!open) break;
    wait_for_progress(clients, nullptr, deadline);
  }
  for (const Client& c : clients) check_replies(c.received);

  // The loop survived whatever came before: a well-behaved client is still served.
  options.connect_timeout = std::chrono::duration_cast<std::chrono::milliseconds>(kDeadline);
  options.port = server.port();
  TcpStore store(options);
  FUZZ_REQUIRE(store.num_keys() >= 0, "a negative key count");
  return 0;
}
