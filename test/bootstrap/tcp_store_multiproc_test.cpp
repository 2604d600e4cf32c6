// TcpStore with real processes: forked clients racing on counters and blocking on keys a parent
// sets later, and a server process that is killed under its clients. Children are forked before
// the parent starts any server thread, and learn the port through a pipe.

#include <cohort/error.hpp>
#include <cohort/store.hpp>

#include "support/forked_child.hpp"
#include "support/process_stop.hpp"
#include "support/sync_pipe.hpp"

#include <catch2/catch.hpp>

#include <csignal>
#include <future>

#include <signal.h>
#include <unistd.h>

using namespace cohort;
using namespace std::chrono_literals;

namespace {

TcpStoreOptions client_options(std::uint16_t port) {
  TcpStoreOptions options;
  options.port = port;
  options.token = "multiproc";
  options.connect_timeout = 10s;
  return options;
}

}  // namespace

TEST_CASE("forked clients: add races, barrier keys and a released blocking get",
          "[tcp_store][multiproc]") {
  const int processes = GENERATE(1, 2, 3, 5, 7);
  constexpr int kAdds = 100;
  INFO(processes << " client processes");
  // The server starts only after the forks; each child takes one note with its port.
  test::SyncPipe ports;
  std::vector<test::ForkedChild> children;
  for (int p = 0; p < processes; ++p) {
    children.emplace_back([&ports, p] {
      TcpStore store(client_options(static_cast<std::uint16_t>(ports.take(10s))));
      for (int k = 0; k < kAdds; ++k) store.add("counter", 1);
      store.set_string("arrived/" + std::to_string(p), std::to_string(::getpid()));
      // Blocks until the parent has seen everyone arrive and released the barrier.
      if (store.get_string("go", 20s) != "go") return 2;
      // Everyone reads the final count the parent published.
      return store.get_string("final", 20s) == std::to_string(store.add("counter", 0)) ? 0 : 3;
    });
  }
  TcpStoreServer server(TcpStoreOptions{.token = "multiproc"});
  for (int p = 0; p < processes; ++p) ports.post(server.port());
  TcpStore parent(client_options(server.port()));
  std::vector<std::string> arrived;
  for (int p = 0; p < processes; ++p) arrived.push_back("arrived/" + std::to_string(p));
  parent.wait(arrived, 20s);
  const std::int64_t total = parent.add("counter", 0);
  CHECK(total == processes * kAdds);
  parent.set_string("final", std::to_string(total));
  parent.set_string("go", "go");
  for (int p = 0; p < processes; ++p) CHECK(children[p].join() == 0);
}

TEST_CASE("a killed server process turns client calls into RemoteError", "[tcp_store][multiproc]") {
  test::SyncPipe port_pipe;
  test::ForkedChild server_process([&port_pipe] {
    TcpStoreServer server(TcpStoreOptions{.token = "multiproc"});
    port_pipe.post(server.port());
    ::pause();  // serve until killed
    return 0;
  });
  TcpStore client(client_options(static_cast<std::uint16_t>(port_pipe.take(10s))));
  client.set_string("before", "ok");
  CHECK(client.get_string("before", 1s) == "ok");
  server_process.kill();
  try {
    client.get("before", 5s);
    FAIL("get after the server died returned");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::RemoteError);
  }
}

TEST_CASE("a server process that stops answering fails calls at the client's io_timeout",
          "[tcp_store][multiproc]") {
  // A node that froze (SIGSTOP here; a hung host or a dropped link alike): the connection stays
  // up and the kernel takes the request, but no answer comes.
  test::SyncPipe port_pipe;
  test::ForkedChild server_process([&port_pipe] {
    TcpStoreServer server(TcpStoreOptions{.token = "multiproc"});
    port_pipe.post(server.port());
    ::pause();
    return 0;
  });
  TcpStoreOptions options = client_options(static_cast<std::uint16_t>(port_pipe.take(10s)));
  options.io_timeout = 300ms;
  TcpStore client(options);
  client.set_string("before", "ok");
  // Stopped, not only signalled: the server's poll thread answered a check sent right after
  // kill() returned, before its main thread had taken the signal (seen in CI on 2026-12-02).
  REQUIRE(test::stop_process(server_process.pid(), 10s));
  // Without the option the call would wait default_store_timeout() (300 s): a bounded wait
  // here, and the server is killed on the way out so the call returns either way.
  auto call = std::async(std::launch::async, [&client] {
    try {
      client.check({"before"});
    } catch (const Error& e) {
      return std::make_pair(e.code(), e.message());
    }
    return std::make_pair(ErrorCode::Internal, std::string("check returned"));
  });
  const bool returned = call.wait_for(20s) == std::future_status::ready;
  server_process.kill();
  const auto [code, message] = call.get();
  CAPTURE(message);
  CHECK(returned);
  CHECK(code == ErrorCode::Timeout);
  CHECK(message.find("store check") != std::string::npos);
  // The connection is out of step after a timed-out exchange: later calls fail fast.
  CHECK_THROWS_AS(client.check({"before"}), Error);
}
