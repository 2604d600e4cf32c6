// What strangers and shortages may cost the store server (lib/bootstrap/store_admission.hpp):
// the admission bookkeeping alone with made-up times; then a real server with connections that
// never show a token (closed at the handshake deadline, the oldest evicted beyond the cap, while
// an authenticated client keeps working); a server process out of descriptors (it must not spin:
// its CPU time over a window is bounded, a behaviour bound rather than a speed claim); and the
// address a job's store binds.

#include <cohort/environment.hpp>
#include <cohort/error.hpp>
#include <cohort/store.hpp>

#include "bootstrap/socket.hpp"
#include "bootstrap/store_admission.hpp"
#include "core/log_sink.hpp"
#include "store_wire.hpp"
#include "support/forked_child.hpp"
#include "support/sync_pipe.hpp"

#include <spdlog/sinks/base_sink.h>
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string_view>
#include <thread>

using namespace cohort;
using namespace cohort::test;
using namespace std::chrono_literals;

namespace {

TcpStoreOptions client_of(std::uint16_t port, std::string token) {
  TcpStoreOptions options;
  options.port = port;
  options.token = std::move(token);
  options.connect_timeout = 10s;
  return options;
}

ErrorCode code_of_new_client(std::uint16_t port, const std::string& token) {
  try {
    TcpStore client(client_of(port, token));
  } catch (const Error& e) {
    return e.code();
  }
  FAIL("a client with token '" << token << "' was accepted");
  return ErrorCode::Internal;
}

// One plain connect() to host:port; true when it was accepted (by the kernel's backlog at least).
bool connects(const std::string& host, std::uint16_t port) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  REQUIRE(::inet_pton(AF_INET, host.c_str(), &address.sin_addr) == 1);
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd >= 0);
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0;
  ::close(fd);
  return ok;
}

// A non-loopback IPv4 address of an interface that is up, if this host has one.
std::optional<std::string> own_ipv4_address() {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return std::nullopt;
  std::optional<std::string> found;
  for (const ifaddrs* a = list; a && !found; a = a->ifa_next) {
    if (!a->ifa_addr || a->ifa_addr->sa_family != AF_INET || !(a->ifa_flags & IFF_UP) ||
        (a->ifa_flags & IFF_LOOPBACK))
      continue;
    char text[INET_ADDRSTRLEN] = {};
    ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(a->ifa_addr)->sin_addr, text,
                sizeof text);
    found = text;
  }
  ::freeifaddrs(list);
  return found;
}

std::uint16_t free_port() {
  TcpStoreServer probe(TcpStoreOptions{});
  return probe.port();
}

// CPU seconds (user + system, all threads) process `pid` has used, from /proc/<pid>/stat.
double cpu_seconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // The command name (field 2) may hold spaces; the fields after its ')' are space-separated,
  // starting with field 3 (state). utime and stime are fields 14 and 15.
  std::istringstream fields(text.substr(text.rfind(')') + 2));
  std::string skip;
  for (int field = 3; field < 14; ++field) fields >> skip;
  long long utime = 0, stime = 0;
  fields >> utime >> stime;
  REQUIRE(fields);
  return static_cast<double>(utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

std::size_t open_descriptors() {
  std::size_t n = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator("/proc/self/fd"))
    ++n;
  return n;
}

// In a server's process: a note on `pipe` for every log line containing `needle`.
class LogNotes final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  LogNotes(SyncPipe& pipe, std::string needle) : pipe_(pipe), needle_(std::move(needle)) {}

 protected:
  // Called while the test holds every descriptor of the process: clang's UBSan checks a vptr by
  // probing the object's memory through a pipe it cannot open then, and would report this object
  // as not a LogNotes.
  __attribute__((no_sanitize("vptr"))) void sink_it_(const spdlog::details::log_msg& msg) override {
    const std::string_view text(msg.payload.data(), msg.payload.size());
    if (text.find(needle_) != std::string_view::npos) pipe_.post();
  }
  void flush_() override {}

 private:
  SyncPipe& pipe_;
  std::string needle_;
};

}  // namespace

TEST_CASE("pending handshakes: oldest evicted at the cap, deadlines in accept order",
          "[tcp_store][limits][unit]") {
  const Clock::time_point t0{};
  bootstrap::PendingHandshakes pending(3, 1000ms);
  CHECK_FALSE(pending.next_deadline());
  CHECK(pending.admit(1, t0).empty());
  CHECK(pending.admit(2, t0 + 100ms).empty());
  CHECK(pending.admit(3, t0 + 200ms).empty());
  CHECK(*pending.next_deadline() == t0 + 1000ms);
  // A fourth evicts the first; after 2 shows its token, a fifth fits without evicting.
  CHECK(pending.admit(4, t0 + 300ms) == std::vector<std::uint64_t>{1});
  pending.remove(2);
  CHECK(pending.admit(5, t0 + 400ms).empty());
  CHECK(pending.size() == 3);
  CHECK(*pending.next_deadline() == t0 + 1200ms);
  // Expired: deadline at or before now, oldest first; they stay until removed.
  CHECK(pending.expired(t0 + 1199ms).empty());
  CHECK(pending.expired(t0 + 1300ms) == std::vector<std::uint64_t>{3, 4});
  CHECK(pending.size() == 3);
  pending.remove(3);
  pending.remove(4);
  pending.remove(42);  // unknown: ignored
  CHECK(*pending.next_deadline() == t0 + 1400ms);
  bootstrap::PendingHandshakes one(1, 10ms);
  CHECK(one.admit(7, t0).empty());
  CHECK(one.admit(8, t0) == std::vector<std::uint64_t>{7});
}

TEST_CASE(
    "accept back-off: rests after a failure, warns once per run, a freed descriptor "
    "resumes at once",
    "[tcp_store][limits][unit]") {
  const Clock::time_point t0 = Clock::now();
  bootstrap::AcceptBackoff backoff;
  CHECK(backoff.accepting(t0));
  CHECK_FALSE(backoff.succeeded(t0));  // no run of failures to end
  CHECK(backoff.failed(t0));           // starts a run: warn
  CHECK_FALSE(backoff.accepting(t0 + 99ms));
  CHECK(backoff.resumes() == t0 + 100ms);
  CHECK(backoff.accepting(t0 + 100ms));
  CHECK_FALSE(backoff.failed(t0 + 100ms));  // same run: no second warning
  CHECK_FALSE(backoff.failed(t0 + 200ms));
  backoff.descriptor_freed();
  CHECK(backoff.accepting(t0 + 201ms));
  const auto run = backoff.succeeded(t0 + 250ms);
  REQUIRE(run);
  CHECK(run->failures == 3);
  CHECK(run->lasted == 250ms);
  CHECK(backoff.failed(t0 + 300ms));  // a new run warns again
}

TEST_CASE("accept errors: a lost connection is skipped, a shortage is not",
          "[tcp_store][limits][unit]") {
  for (const int err : {ECONNABORTED, EPROTO, EPERM, EINTR, ENETUNREACH, EHOSTUNREACH})
    CHECK(bootstrap::lost_before_accept(err));
  for (const int err : {EMFILE, ENFILE, ENOBUFS, ENOMEM, EBADF, EINVAL})
    CHECK_FALSE(bootstrap::lost_before_accept(err));
}

TEST_CASE("warnings: the first, then one per interval counting the ones held back",
          "[tcp_store][limits][unit]") {
  const Clock::time_point t0 = Clock::now();
  bootstrap::WarningLimiter limiter;
  std::uint64_t held_back = 99;
  CHECK(limiter.allow(t0, held_back));
  CHECK(held_back == 0);
  CHECK_FALSE(limiter.allow(t0 + 1s, held_back));
  CHECK_FALSE(limiter.allow(t0 + 9s, held_back));
  CHECK(limiter.allow(t0 + 10s, held_back));
  CHECK(held_back == 2);
  CHECK(bootstrap::held_back_note(0).empty());
  CHECK(bootstrap::held_back_note(2) == " (and 2 more since the last such warning)");
}

TEST_CASE("strangers are closed at the handshake deadline; members stay",
          "[tcp_store][limits][unit]") {
  constexpr auto kDeadline = 300ms;
  TcpStoreServer server(TcpStoreOptions{.token = "tok", .handshake_timeout = kDeadline});
  TcpStore member(client_of(server.port(), "tok"));
  member.set_string("k", "v");
  const auto start = Clock::now();
  RawSocket idle(server.port());  // connects and says nothing
  RawSocket half(server.port());  // starts a handshake and never finishes it
  const Bytes hello = hello_frame("tok");
  half.send_bytes(Bytes(hello.begin(), hello.begin() + 20));
  CHECK(member.get_string("k", 1s) == "v");
  CHECK(idle.closed_by_server(10s));
  CHECK(half.closed_by_server(10s));
  // The server cannot close them before their deadline, counted from accept (after `start`).
  CHECK(Clock::now() - start >= kDeadline);
  // The member, connected for longer than the deadline, is untouched.
  member.set_string("k", "w");
  CHECK(member.get_string("k", 1s) == "w");
  // A wrong token is still refused at once, and the server still serves.
  CHECK(code_of_new_client(server.port(), "wrong") == ErrorCode::InvalidArgument);
  TcpStore later(client_of(server.port(), "tok"));
  CHECK(later.get_string("k", 1s) == "w");
}

TEST_CASE("beyond the cap the oldest stranger is evicted; members keep working",
          "[tcp_store][limits][unit]") {
  constexpr std::size_t kCap = 8;
  TcpStoreServer server(
      TcpStoreOptions{.token = "tok", .handshake_timeout = 60s, .max_pending_handshakes = kCap});
  TcpStore member(client_of(server.port(), "tok"));
  member.set_string("k", "v");
  std::vector<std::unique_ptr<RawSocket>> strangers;
  for (std::size_t i = 0; i < kCap + 4; ++i)
    strangers.push_back(std::make_unique<RawSocket>(server.port()));
  // Each of the last four evicted the oldest waiting: the first four, in order.
  for (std::size_t i = 0; i < 4; ++i) {
    INFO("stranger " << i);
    CHECK(strangers[i]->closed_by_server(10s));
  }
  CHECK(member.get_string("k", 1s) == "v");
  // The fourth eviction happened when the last stranger was accepted; nobody arrived since.
  for (std::size_t i = 4; i < kCap + 4; ++i) {
    INFO("stranger " << i);
    CHECK(strangers[i]->open_so_far());
  }
  // An honest newcomer finds the cap reached: it evicts the oldest stranger and is served.
  TcpStore newcomer(client_of(server.port(), "tok"));
  CHECK(newcomer.get_string("k", 1s) == "v");
  CHECK(strangers[4]->closed_by_server(10s));
  for (std::size_t i = 5; i < kCap + 4; ++i) CHECK(strangers[i]->open_so_far());
  member.set_string("k", "w");
  CHECK(newcomer.get_string("k", 1s) == "w");
}

TEST_CASE("a client hung up on before its handshake is answered connects again",
          "[tcp_store][limits][unit]") {
  // A listener that closes its first connection unanswered, as a server short of room closes an
  // evicted one, and then gives way to a real server on the same port.
  UniqueFd listener = bootstrap::listen_on("127.0.0.1", 0);
  sockaddr_in bound{};
  socklen_t length = sizeof bound;
  REQUIRE(::getsockname(listener.get(), reinterpret_cast<sockaddr*>(&bound), &length) == 0);
  const std::uint16_t port = ntohs(bound.sin_port);
  std::promise<std::string> outcome;
  std::thread client([&] {
    try {
      TcpStore store(client_of(port, "tok"));
      store.set_string("k", "v");
      outcome.set_value(store.get_string("k", 1s));
    } catch (const std::exception& e) {
      outcome.set_value(std::string("failed: ") + e.what());
    }
  });
  pollfd pfd{listener.get(), POLLIN, 0};
  REQUIRE(::poll(&pfd, 1, 10000) == 1);
  UniqueFd first(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
  REQUIRE(first);
  first.reset();
  listener.reset();  // until the server binds, the client's attempts are refused
  TcpStoreServer server(TcpStoreOptions{.port = port, .token = "tok"});
  auto result = outcome.get_future();
  CHECK(result.get() == "v");
  client.join();
}

TEST_CASE("out of descriptors, the server neither spins nor floods the log, and recovers",
          "[tcp_store][limits][multiproc]") {
  // The server runs in a child process whose descriptor limit leaves room for kRoom
  // connections; the parent opens more. The rest wait in the kernel's backlog while accept()
  // fails with EMFILE. Every "cannot accept" warning becomes a note on `warnings`.
  constexpr std::size_t kRoom = 20;
  constexpr std::size_t kStrangers = 2 * kRoom;
  SyncPipe ports, warnings;
  ForkedChild server_process([&] {
    spdlog::logger& logger = log::logger();
    logger.sinks().push_back(std::make_shared<LogNotes>(warnings, "cannot accept connections"));
    // The listener and the wake-up eventfd take two of the new descriptors.
    const rlim_t limit = open_descriptors() + 2 + kRoom;
    const rlimit low{limit, limit};
    if (::setrlimit(RLIMIT_NOFILE, &low) != 0) return 2;
    TcpStoreServer server(TcpStoreOptions{
        .token = "fd", .handshake_timeout = 120s, .max_pending_handshakes = 10 * kStrangers});
    ports.post(server.port());
    ::pause();  // serve until killed
    return 0;
  });
  const auto port = static_cast<std::uint16_t>(ports.take(10s));
  TcpStore member(client_of(port, "fd"));
  member.set_string("before", "1");
  std::vector<std::unique_ptr<RawSocket>> strangers;
  for (std::size_t i = 0; i < kStrangers; ++i)
    strangers.push_back(std::make_unique<RawSocket>(port));
  warnings.take(10s);  // the server has run out
  // The window: one second in which a second warning must not come. Spinning on the readable
  // listener (as before) burnt a whole core and logged a line per attempt.
  const double cpu_before = cpu_seconds(server_process.pid());
  CHECK_THROWS(warnings.take(1s));
  const double cpu_used = cpu_seconds(server_process.pid()) - cpu_before;
  CHECK(cpu_used < 0.25);
  // Connected clients are served meanwhile.
  CHECK(member.get_string("before", 1s) == "1");
  member.set_string("during", "2");
  // Strangers leave: their descriptors free up, the backlog drains, a new client gets in.
  strangers.clear();
  TcpStore newcomer(client_of(port, "fd"));
  CHECK(newcomer.get_string("during", 1s) == "2");
  server_process.kill();
}

TEST_CASE("the store binds where its clients are told to connect", "[tcp_store][limits][unit]") {
  using bootstrap::is_wildcard_address;
  using bootstrap::store_bind_address;
  const std::optional<std::string> own = own_ipv4_address();

  SECTION("the rules") {
    CHECK(store_bind_address("", 1) == "127.0.0.1");
    // A loopback literal is meant: every node runs on this host.
    CHECK(store_bind_address("127.0.0.1", 4) == "127.0.0.1");
    CHECK(store_bind_address("localhost", 1) == "localhost");
    // A name resolving to loopback here, on several nodes, cannot be what the others use.
    CHECK(is_wildcard_address(store_bind_address("localhost", 2)));
    // Not this host's (TEST-NET-2): reached through NAT or a forwarded port, if at all.
    CHECK(store_bind_address("198.51.100.7", 2) == "0.0.0.0");
    if (own) CHECK(store_bind_address(*own, 2) == *own);
    try {
      store_bind_address("no-such-host.invalid", 2);
      FAIL("an unresolvable name was accepted");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::InvalidArgument);
    }
    // No address on several nodes: this host's own address, or the wildcard when its name
    // resolves to loopback only.
    const std::string mine = store_bind_address("", 3);
    CHECK((is_wildcard_address(mine) || (own && mine == *own) || mine.find(':') != mine.npos));
  }

  SECTION("rank 0 of a multi-node job hosting at a loopback address listens on it alone") {
    Environment env;
    env.rank = 0;
    env.world_size = 2;
    env.num_nodes = 2;
    env.local_world_size = 1;
    env.store_addr = "127.0.0.1";
    env.store_port = free_port();
    env.token = "bound";
    env.host_store = true;
    env.source = LaunchSource::Config;
    auto store = connect_store(env);
    store->set_string("k", "v");
    CHECK(connects("127.0.0.1", env.store_port));
    // 127.0.0.2 is this host too (all of 127/8 is): a wildcard listener would take it.
    CHECK_FALSE(connects("127.0.0.2", env.store_port));
    TcpStore other(client_of(env.store_port, "bound"));
    CHECK(other.get_string("k", 1s) == "v");
  }

  SECTION("rank 0 hosting at this host's own address listens there, not on loopback") {
    if (!own) {
      WARN("no non-loopback IPv4 interface is up: nothing to check");
      return;
    }
    Environment env;
    env.rank = 0;
    env.world_size = 2;
    env.num_nodes = 2;
    env.local_world_size = 1;
    env.store_addr = *own;
    env.store_port = free_port();
    env.token = "bound";
    env.host_store = true;
    env.source = LaunchSource::Config;
    auto store = connect_store(env);
    store->set_string("k", "v");
    CHECK(connects(*own, env.store_port));
    CHECK_FALSE(connects("127.0.0.1", env.store_port));
    TcpStoreOptions options = client_of(env.store_port, "bound");
    options.host = *own;
    TcpStore other(options);
    CHECK(other.get_string("k", 1s) == "v");
  }
}

namespace {

/// A loopback port that swallows connection attempts: a listener whose accept queue (backlog 0)
/// is full drops further SYNs, so a connect there stays in progress, as to a filtered address.
struct BlackHole {
  UniqueFd listener;
  std::vector<UniqueFd> fillers;
  std::uint16_t port = 0;

  BlackHole() {
    listener = UniqueFd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof address;
    REQUIRE(::bind(listener.get(), reinterpret_cast<sockaddr*>(&address), length) == 0);
    REQUIRE(::listen(listener.get(), 0) == 0);
    REQUIRE(::getsockname(listener.get(), reinterpret_cast<sockaddr*>(&address), &length) == 0);
    port = ntohs(address.sin_port);
    // Connect until an attempt is left hanging: the queue is then full.
    for (int i = 0; i < 8; ++i) {
      UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
      const bool at_once = ::connect(fd.get(), reinterpret_cast<sockaddr*>(&address), length) == 0;
      REQUIRE((at_once || errno == EINPROGRESS));
      pollfd pfd{fd.get(), POLLOUT, 0};
      const bool connected = at_once || ::poll(&pfd, 1, 500) == 1;
      fillers.push_back(std::move(fd));
      if (!connected) return;
    }
    FAIL("a listener with a full backlog kept accepting connections");
  }
};

}  // namespace

TEST_CASE("an address that swallows connects leaves the next one its share of the deadline",
          "[tcp_store][limits][unit]") {
  // A host name can resolve to several addresses, the first of them filtered (an IPv6 address
  // a firewall drops). connect_once used to give the first the whole deadline, so the working
  // second one was only tried once it had passed.
  BlackHole hole;
  const UniqueFd live = bootstrap::listen_on("127.0.0.1", 0);
  sockaddr_in live_address{}, hole_address{};
  socklen_t length = sizeof live_address;
  REQUIRE(::getsockname(live.get(), reinterpret_cast<sockaddr*>(&live_address), &length) == 0);
  hole_address = live_address;
  hole_address.sin_port = htons(hole.port);
  addrinfo second{};
  second.ai_family = AF_INET;
  second.ai_socktype = SOCK_STREAM;
  second.ai_addr = reinterpret_cast<sockaddr*>(&live_address);
  second.ai_addrlen = sizeof live_address;
  addrinfo first = second;
  first.ai_addr = reinterpret_cast<sockaddr*>(&hole_address);
  first.ai_next = &second;
  const auto deadline_in = 6s;
  const auto start = std::chrono::steady_clock::now();
  const UniqueFd fd = bootstrap::connect_once(&first, "two addresses", start + deadline_in);
  const auto took = std::chrono::steady_clock::now() - start;
  sockaddr_in peer{};
  socklen_t peer_length = sizeof peer;
  REQUIRE(::getpeername(fd.get(), reinterpret_cast<sockaddr*>(&peer), &peer_length) == 0);
  CHECK(peer.sin_port == live_address.sin_port);
  // The first address had half of it; the second connected long before the deadline.
  CHECK(took < deadline_in - 1s);
}
