// TcpStore with real processes: forked clients racing on counters and blocking on keys a parent
// sets later, and a server process that is killed under its clients. Children are forked before
// the parent starts any server thread, and learn the port through a pipe.

#include <cohort/error.hpp>
#include <cohort/store.hpp>

#include "forked_child.hpp"

#include <catch2/catch.hpp>

#include <poll.h>
#include <unistd.h>

using namespace cohort;
using namespace std::chrono_literals;

namespace {

// A pipe carrying one port number from parent to child (or child to parent).
class PortPipe {
 public:
  PortPipe() { REQUIRE(::pipe(fds_) == 0); }
  ~PortPipe() {
    ::close(fds_[0]);
    ::close(fds_[1]);
  }
  PortPipe(const PortPipe&) = delete;
  PortPipe& operator=(const PortPipe&) = delete;

  void write_port(std::uint16_t port) {
    if (::write(fds_[1], &port, sizeof port) != sizeof port) throw std::runtime_error("pipe write");
  }
  std::uint16_t read_port(std::chrono::milliseconds timeout) {
    pollfd pfd{fds_[0], POLLIN, 0};
    if (::poll(&pfd, 1, static_cast<int>(timeout.count())) != 1)
      throw std::runtime_error("no port arrived through the pipe");
    std::uint16_t port = 0;
    if (::read(fds_[0], &port, sizeof port) != sizeof port) throw std::runtime_error("pipe read");
    return port;
  }

 private:
  int fds_[2];
};

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
  std::vector<std::unique_ptr<PortPipe>> pipes;
  std::vector<test::ForkedChild> children;
  for (int p = 0; p < processes; ++p) {
    pipes.push_back(std::make_unique<PortPipe>());
    PortPipe& pipe = *pipes.back();
    children.emplace_back([&pipe, p] {
      TcpStore store(client_options(pipe.read_port(10s)));
      for (int k = 0; k < kAdds; ++k) store.add("counter", 1);
      store.set_string("arrived/" + std::to_string(p), std::to_string(::getpid()));
      // Blocks until the parent has seen everyone arrive and released the barrier.
      if (store.get_string("go", 20s) != "go") return 2;
      // Everyone reads the final count the parent published.
      return store.get_string("final", 20s) == std::to_string(store.add("counter", 0)) ? 0 : 3;
    });
  }
  TcpStoreServer server(TcpStoreOptions{.token = "multiproc"});
  for (auto& pipe : pipes) pipe->write_port(server.port());
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
  PortPipe port_pipe;
  test::ForkedChild server_process([&port_pipe] {
    TcpStoreServer server(TcpStoreOptions{.token = "multiproc"});
    port_pipe.write_port(server.port());
    ::pause();  // serve until killed
    return 0;
  });
  TcpStore client(client_options(port_pipe.read_port(10s)));
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
