// TcpStoreServer under concurrent and hostile clients in one process: many client threads,
// wrong tokens, oversized frame headers, garbage bytes, a vanished server, IPv6, connect and bind
// failures. Raw sockets speak the wire format directly (see lib/bootstrap/store_protocol.hpp).

#include <cohort/error.hpp>
#include <cohort/store.hpp>

#include "bootstrap/socket.hpp"
#include "store_wire.hpp"
#include "support/blocked_thread.hpp"

#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>
#include <atomic>
#include <cstring>
#include <future>
#include <random>
#include <thread>

using namespace cohort;
using namespace cohort::test;
using namespace std::chrono_literals;

namespace {

Bytes bytes_of(std::string_view text) {
  return Bytes(text.begin(), text.end());
}

ErrorCode code_of(const std::function<void()>& call) {
  try {
    call();
  } catch (const Error& e) {
    return e.code();
  }
  FAIL("the call did not throw");
  return ErrorCode::Internal;
}

std::string message_of(const std::function<void()>& call) {
  try {
    call();
  } catch (const Error& e) {
    return e.message();
  }
  FAIL("the call did not throw");
  return {};
}

TcpStoreOptions options_for(const TcpStoreServer& server, std::string token) {
  TcpStoreOptions options;
  options.host = server.host();
  options.port = server.port();
  options.token = std::move(token);
  options.connect_timeout = 5s;
  return options;
}

// The server still answers a well-behaved client.
void expect_server_alive(const TcpStoreServer& server, const std::string& token) {
  TcpStore client(options_for(server, token));
  client.set_string("alive", "yes");
  CHECK(client.get_string("alive", 1s) == "yes");
}

}  // namespace

TEST_CASE("server binds loopback by default and reports its port", "[tcp_store][unit]") {
  TcpStoreServer server(TcpStoreOptions{});
  CHECK(server.host() == "127.0.0.1");
  CHECK(server.port() != 0);
}

TEST_CASE("many client threads: add races and concurrent blocking gets", "[tcp_store][unit]") {
  TcpStoreServer server(TcpStoreOptions{.token = "t"});
  constexpr int kClients = 12;
  constexpr int kAdds = 150;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&, i] {
      try {
        TcpStore client(options_for(server, "t"));
        for (int k = 0; k < kAdds; ++k) client.add("counter", 1);
        client.set_string("done/" + std::to_string(i), "1");
        // Every client blocks until the main thread releases all of them with one key.
        if (client.get_string("release", 20s) != "go") failures++;
      } catch (const std::exception& e) {
        UNSCOPED_INFO("client " << i << ": " << e.what());
        failures++;
      }
    });
  }
  TcpStore main_client(options_for(server, "t"));
  std::vector<std::string> done_keys;
  for (int i = 0; i < kClients; ++i) done_keys.push_back("done/" + std::to_string(i));
  main_client.wait(done_keys, 20s);
  CHECK(main_client.add("counter", 0) == kClients * kAdds);
  main_client.set_string("release", "go");
  for (auto& t : threads) t.join();
  CHECK(failures == 0);
}

TEST_CASE("one TcpStore shared by threads serialises its calls", "[tcp_store][unit]") {
  TcpStoreServer server(TcpStoreOptions{});
  auto client = std::make_shared<TcpStore>(options_for(server, ""));
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      const std::string key = std::string("t").append(std::to_string(t));
      for (int k = 0; k < 100; ++k) {
        client->add("shared", 2);
        client->set_string(key, std::to_string(k));
      }
    });
  for (auto& t : threads) t.join();
  CHECK(client->get_string("shared", 1s) == "800");
  CHECK(client->get_string("t3", 1s) == "99");
}

TEST_CASE("a short call does not wait out another thread's long get on a shared TcpStore",
          "[tcp_store][unit]") {
  TcpStoreServer server(TcpStoreOptions{});
  TcpStore shared(options_for(server, ""));
  TcpStore other(options_for(server, ""));
  std::promise<pid_t> waiter_id;
  std::atomic<bool> long_get_returned{false};
  std::string long_get_value;  // read once the waiter is joined
  std::thread waiter([&] {
    waiter_id.set_value(test::current_thread_id());
    try {
      long_get_value = shared.get_string("released-later", 20s);
    } catch (const Error& e) {
      long_get_value = e.what();
    }
    long_get_returned = true;
  });
  // The long get holds the connection: its request sent, its thread asleep awaiting the reply.
  REQUIRE(
      test::wait_until_blocked(waiter_id.get_future().get(), test::BlockedIn::FileDescriptor, 10s));
  // Nothing was sent by these, so only the connection's wait can have timed them out.
  const std::string message = message_of([&] { shared.get("absent", 200ms); });
  CHECK(code_of([&] { shared.get("absent", 200ms); }) == ErrorCode::Timeout);
  CHECK(message.find("'absent'") != std::string::npos);
  CHECK(message.find("another thread's call held the connection") != std::string::npos);
  CHECK(code_of([&] { shared.wait({"absent"}, 0ms); }) == ErrorCode::Timeout);
  // Returned at its own deadline, not the long get's.
  CHECK_FALSE(long_get_returned);
  other.set_string("released-later", "now");
  waiter.join();
  CHECK(long_get_value == "now");
  // Nothing was sent by the calls that timed out waiting: the connection is still in step.
  shared.set_string("after", "fine");
  CHECK(shared.get_string("after", 1s) == "fine");
}

TEST_CASE("compare_set elects exactly one winner among racing clients", "[tcp_store][unit]") {
  TcpStoreServer server(TcpStoreOptions{});
  constexpr int kClients = 8;
  std::atomic<int> winners{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i)
    threads.emplace_back([&, i] {
      TcpStore client(options_for(server, ""));
      const Bytes mine = bytes_of("client-" + std::to_string(i));
      if (client.compare_set("leader", {}, mine) == mine) winners++;
    });
  for (auto& t : threads) t.join();
  CHECK(winners == 1);
}

TEST_CASE("a wrong token is refused and the server keeps serving", "[tcp_store][unit]") {
  TcpStoreServer server(TcpStoreOptions{.token = "right"});
  for (const std::string bad : {"wrong", "", "right-but-longer"}) {
    INFO("token '" << bad << "'");
    TcpStoreOptions options = options_for(server, bad);
    CHECK(code_of([&] { TcpStore client(options); }) == ErrorCode::InvalidArgument);
    CHECK_THAT(message_of([&] { TcpStore client(options); }), Catch::Contains("token"));
  }
  // A raw client skipping the handshake is dropped too.
  RawSocket raw(server.port());
  raw.send_bytes(frame_header(9 /* num_keys */, 0));
  CHECK(raw.closed_by_server(5s));
  expect_server_alive(server, "right");
}

TEST_CASE("an oversized frame header is refused before allocating", "[tcp_store][unit]") {
  TcpStoreServer server(TcpStoreOptions{.token = "tok"});
  SECTION("1 TiB claimed before the handshake") {
    RawSocket raw(server.port());
    raw.send_bytes(frame_header(1 /* hello */, std::uint64_t{1} << 40));
    CHECK(raw.closed_by_server(5s));
  }
  SECTION("a handshake claiming 1 MiB: strangers may not make the server reserve much") {
    RawSocket raw(server.port());
    raw.send_bytes(frame_header(1 /* hello */, std::uint64_t{1} << 20));
    CHECK(raw.closed_by_server(5s));
  }
  SECTION("1 TiB claimed after a valid handshake") {
    RawSocket raw(server.port());
    raw.send_bytes(hello_frame("tok"));
    Bytes header = frame_header(2 /* set */, std::uint64_t{1} << 40);
    raw.send_bytes(header);
    CHECK(raw.closed_by_server(5s));
  }
  SECTION("a field longer than max_value_bytes inside a legal body") {
    TcpStoreServer small(TcpStoreOptions{.token = "tok", .max_value_bytes = 1024});
    RawSocket raw(small.port());
    raw.send_bytes(hello_frame("tok"));
    Bytes body = field("k");
    put_le(body, 2000, 8);  // claims 2000 bytes, only 8 follow
    put_le(body, 0, 8);
    Bytes frame = frame_header(2, body.size());
    frame.insert(frame.end(), body.begin(), body.end());
    raw.send_bytes(frame);
    CHECK(raw.closed_by_server(5s));
    expect_server_alive(small, "tok");
    // The client refuses to send what the bound forbids, naming the size.
    TcpStore client(options_for(small, "tok"));
    client.set("ok", Bytes(1024, 7));
    CHECK(client.get("ok", 1s).size() == 1024);
    TcpStoreOptions limited = options_for(small, "tok");
    limited.max_value_bytes = 1024;
    TcpStore bounded(limited);
    CHECK(code_of([&] { bounded.set("big", Bytes(1025, 1)); }) == ErrorCode::InvalidArgument);
    CHECK_THAT(message_of([&] { bounded.set("big", Bytes(1025, 1)); }), Catch::Contains("1025"));
  }
  expect_server_alive(server, "tok");
}

TEST_CASE("garbage on the port does not hurt the server", "[tcp_store][unit]") {
  TcpStoreServer server(TcpStoreOptions{.token = "tok"});
  std::mt19937 random(12345);
  {
    RawSocket raw(server.port());
    Bytes junk(4096);
    for (auto& b : junk) b = static_cast<std::uint8_t>(random());
    raw.send_bytes(junk);
    CHECK(raw.closed_by_server(5s));
  }
  {
    RawSocket raw(server.port());
    raw.send_bytes(bytes_of("GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
    CHECK(raw.closed_by_server(5s));
  }
  {
    // A valid header with an unknown message type.
    RawSocket raw(server.port());
    raw.send_bytes(frame_header(0x42, 0));
    CHECK(raw.closed_by_server(5s));
  }
  {
    // Half a frame, then the client vanishes.
    RawSocket raw(server.port());
    raw.send_bytes(hello_frame("tok"));
    Bytes partial = frame_header(2, 100);
    partial.resize(partial.size() + 10, 0);
    raw.send_bytes(partial);
  }
  { RawSocket connect_and_leave(server.port()); }
  expect_server_alive(server, "tok");
}

TEST_CASE("a client that hangs up while parked leaves the server healthy", "[tcp_store][unit]") {
  TcpStoreServer server(TcpStoreOptions{});
  {
    RawSocket raw(server.port());
    raw.send_bytes(hello_frame(""));
    // Taking the handshake's reply leaves nothing unread, so the hang-up below is an orderly FIN
    // (closing over unread bytes would send a RST, which the server may see before the get).
    REQUIRE(raw.receive_frame(5s) == 0x80 /* ok */);
    Bytes body;
    put_le(body, 8, 8);
    put_le(body, 60000, 8);  // timeout_ms
    const Bytes key = field("never-set");
    body.insert(body.end(), key.begin(), key.end());
    Bytes frame = frame_header(3 /* get */, body.size());
    frame.insert(frame.end(), body.begin(), body.end());
    raw.send_bytes(frame);
    // Hanging up now: TCP delivers the get before the FIN and the server reads a connection's
    // bytes in order, so it has parked the get when it learns of the hang-up.
  }
  TcpStore client(options_for(server, ""));
  client.set_string("never-set", "now set");
  CHECK(client.get_string("never-set", 1s) == "now set");
}

TEST_CASE("a vanished server turns calls into RemoteError", "[tcp_store][unit]") {
  auto server = std::make_unique<TcpStoreServer>(TcpStoreOptions{});
  TcpStore idle(options_for(*server, ""));
  TcpStore blocked(options_for(*server, ""));
  idle.set_string("k", "v");
  std::atomic<int> blocked_code{-1};
  std::promise<pid_t> waiter_id;
  std::thread waiter([&] {
    waiter_id.set_value(test::current_thread_id());
    try {
      blocked.get("never", 20s);
    } catch (const Error& e) {
      blocked_code = static_cast<int>(e.code());
    }
  });
  // The server goes only once the get is blocked: its request sent, the client asleep in poll()
  // for the reply.
  const bool was_blocked =
      test::wait_until_blocked(waiter_id.get_future().get(), test::BlockedIn::FileDescriptor, 10s);
  server.reset();
  waiter.join();
  CHECK(was_blocked);
  CHECK(blocked_code == static_cast<int>(ErrorCode::RemoteError));
  CHECK(code_of([&] { idle.get("k", 1s); }) == ErrorCode::RemoteError);
  // Later calls fail fast with the cause.
  CHECK(code_of([&] { idle.set_string("k", "w"); }) == ErrorCode::RemoteError);
}

TEST_CASE("IPv6 loopback works end to end", "[tcp_store][unit]") {
  TcpStoreServer server(TcpStoreOptions{.host = "::1", .token = "six"});
  CHECK(server.host() == "::1");
  TcpStore client(options_for(server, "six"));
  client.set_string("v6", "yes");
  CHECK(client.get_string("v6", 1s) == "yes");
  CHECK(client.add("n", 4) == 4);
}

// A client's options for 127.0.0.1 at a port whose server is gone (nobody listens there).
TcpStoreOptions options_for_a_gone_server(std::chrono::milliseconds connect_timeout) {
  TcpStoreOptions options;
  {
    TcpStoreServer gone(TcpStoreOptions{});
    options.port = gone.port();
  }
  options.host = "127.0.0.1";
  options.connect_timeout = connect_timeout;
  return options;
}

TEST_CASE("connect gives up with Timeout naming host:port", "[tcp_store][unit]") {
  TcpStoreOptions options = options_for_a_gone_server(150ms);
  const std::uint16_t port = options.port;
  CHECK(code_of([&] { TcpStore client(options); }) == ErrorCode::Timeout);
  CHECK_THAT(message_of([&] { TcpStore client(options); }),
             Catch::Contains(std::string("127.0.0.1:").append(std::to_string(port))));
  options.port = 0;
  CHECK(code_of([&] { TcpStore client(options); }) == ErrorCode::InvalidArgument);
}

TEST_CASE("without retry_refused, a port nobody listens on fails connect at once",
          "[tcp_store][unit]") {
  TcpStoreOptions options = options_for_a_gone_server(20s);
  const std::uint16_t port = options.port;
  options.retry_refused = false;
  const auto start = std::chrono::steady_clock::now();
  const std::string message = message_of([&] { TcpStore client(options); });
  CHECK(code_of([&] { TcpStore client(options); }) == ErrorCode::RemoteError);
  CHECK_THAT(message,
             Catch::Contains("nobody listens for the store at 127.0.0.1:" + std::to_string(port)));
  // Not connect_timeout's 20 s: the refusal is final.
  CHECK(std::chrono::steady_clock::now() - start < 10s);
}

TEST_CASE("a host name is looked up (through the helper thread) and connected",
          "[tcp_store][unit]") {
  // "localhost" is a name, not a literal: it takes the lookup thread's path (/etc/hosts), which
  // the sanitizer builds then see. It may resolve to ::1 first, where nobody listens: the next
  // address is tried.
  TcpStoreServer server(TcpStoreOptions{.token = "named"});
  TcpStoreOptions options = options_for(server, "named");
  options.host = "localhost";
  TcpStore first(options);
  first.set_string("via", "localhost");
  TcpStore second(options);  // the first lookup's answer, or a fresh one
  CHECK(second.get_string("via", 1s) == "localhost");
}

TEST_CASE("a listener that never answers the handshake fails connect at connect_timeout",
          "[tcp_store][unit]") {
  // The kernel completes connections into the listen backlog, so the client connects; nothing
  // ever reads its hello. connect_timeout is the whole budget, the handshake included.
  const UniqueFd silent = bootstrap::listen_on("127.0.0.1", 0);
  sockaddr_in address{};
  socklen_t length = sizeof address;
  REQUIRE(::getsockname(silent.get(), reinterpret_cast<sockaddr*>(&address), &length) == 0);
  TcpStoreOptions options;
  options.host = "127.0.0.1";
  options.port = ntohs(address.sin_port);
  options.connect_timeout = 300ms;
  const auto start = std::chrono::steady_clock::now();
  CHECK(code_of([&] { TcpStore client(options); }) == ErrorCode::Timeout);
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // The handshake used to get at least 5 s of its own; the bound leaves room for a loaded host.
  CHECK(took < 0.3 + 2.5);
}

TEST_CASE("a socket connected to itself is told apart from one connected to a server",
          "[tcp_store][unit]") {
  // Bound to a port and then connected to that same port, a socket connects to itself (TCP's
  // simultaneous open): what a client meets when the kernel happens to pick, as its source,
  // the free port it is connecting to. (CI met it: the client read its own hello as the reply.)
  const int self = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(self >= 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(self, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
  socklen_t length = sizeof address;
  REQUIRE(::getsockname(self, reinterpret_cast<sockaddr*>(&address), &length) == 0);
  REQUIRE(::connect(self, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
  CHECK(cohort::bootstrap::connected_to_itself(self));
  ::close(self);

  TcpStoreServer server(TcpStoreOptions{});
  const int client = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(client >= 0);
  sockaddr_in to_server{};
  to_server.sin_family = AF_INET;
  to_server.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  to_server.sin_port = htons(server.port());
  REQUIRE(::connect(client, reinterpret_cast<sockaddr*>(&to_server), sizeof to_server) == 0);
  CHECK_FALSE(cohort::bootstrap::connected_to_itself(client));
  ::close(client);
}

TEST_CASE("a port in use fails the bind naming addr:port and errno", "[tcp_store][unit]") {
  TcpStoreServer first(TcpStoreOptions{});
  TcpStoreOptions same;
  same.port = first.port();
  const std::string message = message_of([&] { TcpStoreServer second(same); });
  CHECK(code_of([&] { TcpStoreServer second(same); }) == ErrorCode::SystemError);
  CHECK_THAT(message,
             Catch::Contains(std::string("127.0.0.1:").append(std::to_string(first.port()))));
  CHECK_THAT(message, Catch::Contains("errno"));
}

TEST_CASE("large values cross intact", "[tcp_store][unit]") {
  TcpStoreServer server(TcpStoreOptions{});
  TcpStore client(options_for(server, ""));
  Bytes big(8u << 20);
  std::mt19937 random(7);
  for (auto& b : big) b = static_cast<std::uint8_t>(random());
  client.set("big", big);
  CHECK(client.get("big", 5s) == big);
  CHECK(client.compare_set("big", big, bytes_of("small")) == bytes_of("small"));
}
