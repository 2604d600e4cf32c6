// A store client against a name service that is slow, failing or absent. The test runs in a
// mount and network namespace of its own whose /etc/resolv.conf names a DNS server inside this test
// (a UDP socket on a loopback address), and whose /etc/nsswitch.conf sends host names to files,
// then DNS: glibc's real resolver meets a name server that never answers, answers SERVFAIL,
// NXDOMAIN, or the address. Needs root (CAP_SYS_ADMIN for the namespace); exits 77 without.

#include <catch2/catch.hpp>

#include <cohort/error.hpp>
#include <cohort/store.hpp>

#include "bootstrap/name_lookup.hpp"
#include "bootstrap/socket.hpp"
#include "catch_session.hpp"
#include "core/tunables.hpp"
#include "support/scoped_env.hpp"
#include "support/temp_dir.hpp"

#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <strings.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <unistd.h>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

using namespace cohort;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

// Where the test's name server listens: a loopback address nothing else uses, on port 53.
constexpr const char* kNameServerAddress = "127.53.53.53";
// Names only the test's name server knows (nothing in /etc/hosts has them), fully qualified
// (the trailing dot) so that glibc asks for them as they are and never with the host's search
// domain appended. Each test case asks for a name of its own: a lookup an earlier case gave up
// on may still be asking for its own.
constexpr const char* kSilentName = "silent.cohort-name-service-test.";
constexpr const char* kKindsName = "kinds.cohort-name-service-test.";
constexpr const char* kRetryName = "retry.cohort-name-service-test.";
constexpr const char* kSlowName = "slow.cohort-name-service-test.";
constexpr const char* kMissingName = "missing.cohort-name-service-test.";
constexpr const char* kLateName = "late.cohort-name-service-test.";
constexpr const char* kMovedName = "moved.cohort-name-service-test.";
// One per answer: a lookup that timed out is still running, and a call for its name joins it.
constexpr const char* kBindSilentName = "bind-silent.cohort-name-service-test.";
constexpr const char* kBindFailingName = "bind-failing.cohort-name-service-test.";
constexpr const char* kBindMissingName = "bind-missing.cohort-name-service-test.";
// glibc's own wait for a name server that does not answer: resolv.conf's timeout (s) × attempts.
constexpr int kResolverTimeoutSeconds = 5;
constexpr int kResolverAttempts = 2;

/// How the test's name server answers a query.
enum class Answer {
  Silent,    ///< never: glibc waits timeout × attempts, then fails with EAI_AGAIN
  Hold,      ///< not yet: kept until release() answers them
  ServFail,  ///< SERVFAIL (a failure that may pass: EAI_AGAIN)
  NxDomain,  ///< the name does not exist (EAI_NONAME)
  Address,   ///< A: the address given (127.0.0.1 unless told); AAAA: none (NOERROR, no answer)
};

/// A DNS server on kNameServerAddress:53 answering the queries for `name` as told (the first
/// `failures_first` of them with `failure` whatever it was told), counting them. Queries for
/// other names are counted apart and never answered.
class FakeNameServer {
 public:
  FakeNameServer(std::string name, Answer answer, int failures_first = 0,
                 Answer failure = Answer::ServFail)
      : name_(name.substr(0, name.find_last_not_of('.') + 1)),
        answer_(answer),
        failure_(failure),
        failures_left_(failures_first) {
    socket_ = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (socket_ < 0)
      throw std::runtime_error("name server socket: " + std::string(strerror(errno)));
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(53);
    ::inet_pton(AF_INET, kNameServerAddress, &address.sin_addr);
    if (::bind(socket_, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0)
      throw std::runtime_error("name server bind: " + std::string(strerror(errno)));
    stop_ = ::eventfd(0, EFD_CLOEXEC);
    thread_ = std::thread([this] { serve(); });
  }
  ~FakeNameServer() {
    const std::uint64_t one = 1;
    (void)!::write(stop_, &one, sizeof one);
    thread_.join();
    ::close(stop_);
    ::close(socket_);
  }
  FakeNameServer(const FakeNameServer&) = delete;
  FakeNameServer& operator=(const FakeNameServer&) = delete;

  void answer(Answer answer) { answer_ = answer; }
  /// The IPv4 address the A records give from now on (its last byte; 127.0.0.x).
  void answer_address(std::uint8_t last_byte) { last_byte_ = last_byte; }
  /// Answers every query held so far, and the ones to come, with `answer`.
  void release(Answer answer) {
    std::lock_guard lock(held_mutex_);
    answer_ = answer;
    for (const Held& held : held_) {
      const auto reply = reply_to(held.query.data(), held.query.size(), answer, last_byte_);
      ::sendto(socket_, reply.data(), reply.size(), 0,
               reinterpret_cast<const sockaddr*>(&held.from), sizeof held.from);
    }
    held_.clear();
  }
  /// Queries for `name`.
  int queries() const { return queries_; }
  /// Queries for any name.
  int all_queries() const { return all_queries_; }
  int servfails_sent() const { return servfails_sent_; }
  int nxdomains_sent() const { return nxdomains_sent_; }

 private:
  void serve() {
    for (;;) {
      pollfd fds[2] = {{socket_, POLLIN, 0}, {stop_, POLLIN, 0}};
      if (::poll(fds, 2, -1) < 0) continue;
      if (fds[1].revents) return;
      std::uint8_t query[512];
      sockaddr_in from{};
      socklen_t from_length = sizeof from;
      const ssize_t got = ::recvfrom(socket_, query, sizeof query, 0,
                                     reinterpret_cast<sockaddr*>(&from), &from_length);
      if (got < 12) continue;
      ++all_queries_;
      if (!asks_for(query, static_cast<std::size_t>(got), name_)) continue;
      ++queries_;
      Answer answer = answer_;
      if (failures_left_ > 0) {
        --failures_left_;
        answer = failure_;
      }
      if (answer == Answer::Silent) continue;
      if (answer == Answer::Hold) {
        std::lock_guard lock(held_mutex_);
        if (answer_ == Answer::Hold) {  // release() may have come meanwhile
          held_.push_back({std::vector<std::uint8_t>(query, query + got), from});
          continue;
        }
        answer = answer_;
      }
      const std::vector<std::uint8_t> reply =
          reply_to(query, static_cast<std::size_t>(got), answer, last_byte_);
      if (reply.empty()) continue;
      if (answer == Answer::ServFail) ++servfails_sent_;
      if (answer == Answer::NxDomain) ++nxdomains_sent_;
      ::sendto(socket_, reply.data(), reply.size(), 0, reinterpret_cast<sockaddr*>(&from),
               from_length);
    }
  }

  // Whether a query's question is `name` (DNS compares names without regard to case).
  static bool asks_for(const std::uint8_t* query, std::size_t length, const std::string& name) {
    std::string asked;
    for (std::size_t at = 12; at < length && query[at] != 0; at += 1u + query[at]) {
      if (at + 1u + query[at] > length) return false;
      if (!asked.empty()) asked += '.';
      asked.append(reinterpret_cast<const char*>(query) + at + 1, query[at]);
    }
    return strcasecmp(asked.c_str(), name.c_str()) == 0;
  }

  // The reply to one query: its header with the response bits set, its question, and for an A
  // query under Answer::Address one record for 127.0.0.<last_byte>. Empty when the query is
  // malformed.
  static std::vector<std::uint8_t> reply_to(const std::uint8_t* query, std::size_t length,
                                            Answer answer, std::uint8_t last_byte) {
    std::size_t end = 12;  // past the question's name: labels up to the empty one
    while (end < length && query[end] != 0) end += 1u + query[end];
    if (end + 5 > length) return {};
    end += 5;  // the terminating zero, QTYPE, QCLASS
    const int qtype = (query[end - 4] << 8) | query[end - 3];
    const bool address_record = answer == Answer::Address && qtype == 1;
    const int rcode = answer == Answer::ServFail ? 2 : answer == Answer::NxDomain ? 3 : 0;

    std::vector<std::uint8_t> reply(query, query + end);
    reply[2] = 0x81;                                     // QR (a response), RD copied as set
    reply[3] = static_cast<std::uint8_t>(0x80 | rcode);  // RA, RCODE
    reply[4] = 0, reply[5] = 1;                          // one question
    reply[6] = 0, reply[7] = address_record ? 1 : 0;     // answers
    reply[8] = reply[9] = reply[10] = reply[11] = 0;     // no authority, no additional
    if (address_record) {
      const std::uint8_t record[] = {0xc0, 0x0c,              // the question's name
                                     0x00, 0x01, 0x00, 0x01,  // A, IN
                                     0x00, 0x00, 0x00, 0x3c,  // TTL 60 s
                                     0x00, 0x04, 127,  0,    0, last_byte};
      reply.insert(reply.end(), std::begin(record), std::end(record));
    }
    return reply;
  }

  struct Held {
    std::vector<std::uint8_t> query;
    sockaddr_in from;
  };
  std::string name_;  // without the trailing dot: names on the wire have none
  int socket_ = -1;
  std::mutex held_mutex_;
  std::vector<Held> held_;
  int stop_ = -1;
  std::atomic<Answer> answer_;
  const Answer failure_;
  std::atomic<int> failures_left_;
  std::atomic<int> queries_{0};
  std::atomic<int> all_queries_{0};
  std::atomic<std::uint8_t> last_byte_{1};
  std::atomic<int> servfails_sent_{0};
  std::atomic<int> nxdomains_sent_{0};
  std::thread thread_;
};

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::optional<Error> error_of(const std::function<void()>& call) {
  try {
    call();
  } catch (const Error& e) {
    return e;
  }
  return std::nullopt;
}

// The first address of a lookup's result, numerically.
std::string first_address(const bootstrap::AddressList& list) {
  REQUIRE(list);
  char text[INET6_ADDRSTRLEN] = {};
  const auto* v4 = reinterpret_cast<const sockaddr_in*>(list->ai_addr);
  REQUIRE(list->ai_family == AF_INET);
  ::inet_ntop(AF_INET, &v4->sin_addr, text, sizeof text);
  return text;
}

}  // namespace

TEST_CASE("a name service that never answers costs a store client no more than connect_timeout",
          "[tcp_store][name_service]") {
  FakeNameServer name_server(kSilentName, Answer::Silent);
  TcpStoreServer server(TcpStoreOptions{});
  TcpStoreOptions options;
  options.host = kSilentName;
  options.port = server.port();
  options.connect_timeout = 500ms;

  const auto start = Clock::now();
  const auto error = error_of([&] { TcpStore client(options); });
  const double took = seconds_since(start);
  REQUIRE(error);
  CHECK(error->code() == ErrorCode::Timeout);
  CHECK_THAT(error->message(),
             Catch::Contains("looking up store host '" + std::string(kSilentName) +
                             "' did not finish by the deadline"));
  // glibc alone would wait 5 s × 2 attempts for this name server; the client gives up at its
  // 0.5 s deadline (the bound leaves room for a loaded machine, not for the resolver's wait).
  CHECK(took < 0.5 + 2.5);
  // The lookup did reach this test's name server: the namespace's resolv.conf is in force.
  CHECK(name_server.queries() >= 1);
}

TEST_CASE("a lookup failure that may pass is told apart from a name that does not exist",
          "[tcp_store][name_service]") {
  const auto deadline = [] { return Clock::now() + 10s; };
  FakeNameServer name_server(kKindsName, Answer::ServFail);
  const auto failing =
      error_of([&] { bootstrap::lookup_stream_addresses(kKindsName, 1, deadline()); });
  REQUIRE(failing);
  CHECK(failing->code() == ErrorCode::SystemError);
  CHECK_THAT(failing->message(), Catch::Contains("a failure that may pass"));

  name_server.answer(Answer::NxDomain);
  const auto missing =
      error_of([&] { bootstrap::lookup_stream_addresses(kKindsName, 1, deadline()); });
  REQUIRE(missing);
  CHECK(missing->code() == ErrorCode::InvalidArgument);
  CHECK_THAT(missing->message(), Catch::Contains(kKindsName));

  name_server.answer(Answer::Address);
  CHECK(first_address(bootstrap::lookup_stream_addresses(kKindsName, 1, deadline())) ==
        "127.0.0.1");

  // A numeric address is never sent to the name service.
  const int queries_before = name_server.all_queries();
  CHECK(first_address(bootstrap::lookup_stream_addresses("127.0.0.1", 1, deadline())) ==
        "127.0.0.1");
  CHECK(name_server.all_queries() == queries_before);
}

TEST_CASE("a store client retries a lookup that failed in a way that may pass",
          "[tcp_store][name_service]") {
  // SERVFAIL for the first queries (glibc's own attempts included, each lookup asks for A and
  // AAAA twice), then the address: the client's first lookups fail with EAI_AGAIN, a later one
  // finds the server.
  constexpr int kServFails = 4 * kResolverAttempts * 2;
  FakeNameServer name_server(kRetryName, Answer::Address, kServFails);
  TcpStoreServer server(TcpStoreOptions{.token = "t"});
  TcpStoreOptions options;
  options.host = kRetryName;
  options.port = server.port();
  options.token = "t";
  options.connect_timeout = 20s;
  TcpStore client(options);
  client.set_string("k", "v");
  TcpStoreOptions direct = options;
  direct.host = "127.0.0.1";
  CHECK(TcpStore(direct).get_string("k", 1s) == "v");
  CHECK(name_server.servfails_sent() == kServFails);
  CHECK(name_server.queries() > kServFails);
}

TEST_CASE("a store client waits for a name that does not exist yet, and names it if it never does",
          "[tcp_store][name_service]") {
  // A job's first node may enter DNS only once it runs (a Kubernetes pod's name): NXDOMAIN for
  // the first queries, then the address.
  constexpr int kMissingFirst = 6;
  TcpStoreServer server(TcpStoreOptions{});
  TcpStoreOptions options;
  options.port = server.port();
  {
    FakeNameServer name_server(kLateName, Answer::Address, kMissingFirst, Answer::NxDomain);
    options.host = kLateName;
    options.connect_timeout = 20s;
    TcpStore client(options);
    client.set_string("late", "yes");
    CHECK(name_server.nxdomains_sent() == kMissingFirst);
  }
  // Never there: Timeout at connect_timeout, naming the name and why.
  FakeNameServer name_server(kMissingName, Answer::NxDomain);
  options.host = kMissingName;
  options.connect_timeout = 500ms;
  const auto start = Clock::now();
  const auto error = error_of([&] { TcpStore client(options); });
  REQUIRE(error);
  CHECK(error->code() == ErrorCode::Timeout);
  CHECK_THAT(error->message(),
             Catch::Contains("cannot resolve store host '" + std::string(kMissingName) + "'"));
  CHECK(seconds_since(start) < 0.5 + 2.5);
  CHECK(name_server.nxdomains_sent() >= 2);  // asked again, not given up at the first
  // Where a server is known to have been (retry_refused off: a published address), a name gone
  // is final, like a refusal.
  options.retry_refused = false;
  options.connect_timeout = 20s;
  const auto gone_start = Clock::now();
  const auto gone = error_of([&] { TcpStore client(options); });
  REQUIRE(gone);
  CHECK(gone->code() == ErrorCode::RemoteError);
  CHECK_THAT(gone->message(), Catch::Contains(kMissingName));
  CHECK(seconds_since(gone_start) < 10.0);  // not connect_timeout's 20 s
}

TEST_CASE("a lookup slower than the caller's deadline is joined, not asked again",
          "[tcp_store][name_service]") {
  // A caller retrying with short deadlines (the file rendezvous tries a published store for at
  // most 5 s at a time) must be able to use a name service slower than one attempt.
  FakeNameServer name_server(kSlowName, Answer::Hold);
  const auto error_by = [](std::chrono::milliseconds wait) {
    return error_of([&] { bootstrap::lookup_stream_addresses(kSlowName, 1, Clock::now() + wait); });
  };
  const auto first = error_by(200ms);
  REQUIRE(first);
  CHECK(first->code() == ErrorCode::Timeout);
  const int asked = name_server.queries();
  CHECK(asked >= 1);
  const auto second = error_by(200ms);
  REQUIRE(second);
  CHECK(second->code() == ErrorCode::Timeout);
  CHECK(name_server.queries() == asked);  // no second lookup: the first is still running
  name_server.release(Answer::Address);
  const auto addresses = bootstrap::lookup_stream_addresses(kSlowName, 1, Clock::now() + 10s);
  CHECK(first_address(addresses) == "127.0.0.1");
  // The answer serves the next caller too, without asking again.
  const int answered = name_server.queries();
  CHECK(first_address(bootstrap::lookup_stream_addresses(kSlowName, 1, Clock::now() + 10s)) ==
        "127.0.0.1");
  CHECK(name_server.queries() == answered);
}

TEST_CASE("an answer that did not connect is looked up again", "[tcp_store][name_service]") {
  // The name pointed at 127.0.0.3, where nobody listens (a server since restarted elsewhere);
  // it now points at the server. The kept answer must not outlive a failed connect.
  FakeNameServer name_server(kMovedName, Answer::Address);
  TcpStoreServer server(TcpStoreOptions{});
  name_server.answer_address(3);
  CHECK(first_address(bootstrap::lookup_stream_addresses(kMovedName, server.port(),
                                                         Clock::now() + 10s)) == "127.0.0.3");
  name_server.answer_address(1);
  TcpStoreOptions options;
  options.host = kMovedName;
  options.port = server.port();
  options.connect_timeout = 10s;
  TcpStore client(options);  // a Timeout at 10 s if it kept trying 127.0.0.3
  client.set_string("moved", "yes");
}

TEST_CASE("where a store binds is decided within the store timeout, whatever the name service does",
          "[tcp_store][name_service]") {
  // Rank 0 (and cohort-run's node 0) looks the advertised address up to choose what to bind.
  std::optional<test::ScopedEnv> store_timeout;
  store_timeout.emplace("COHORT_STORE_TIMEOUT", "0.5");
  reload_tunables();
  {
    FakeNameServer name_server(kBindSilentName, Answer::Silent);
    const auto start = Clock::now();
    CHECK(bootstrap::store_bind_address(kBindSilentName, 2) == "0.0.0.0");  // with a warning
    CHECK(seconds_since(start) < 0.5 + 2.5);                                // glibc alone: 5 s x 2
    CHECK(name_server.queries() >= 1);
  }
  {
    FakeNameServer name_server(kBindFailingName, Answer::ServFail);
    CHECK(bootstrap::store_bind_address(kBindFailingName, 2) == "0.0.0.0");
    CHECK(name_server.servfails_sent() >= 1);
  }
  {
    FakeNameServer name_server(kBindMissingName, Answer::NxDomain);
    const auto missing = error_of([&] { bootstrap::store_bind_address(kBindMissingName, 2); });
    REQUIRE(missing);
    CHECK(missing->code() == ErrorCode::InvalidArgument);
  }
  store_timeout.reset();
  reload_tunables();
}

namespace {

// Puts this process in a mount namespace of its own with resolv.conf and nsswitch.conf naming
// the test's name server. Returns why it could not (empty when it did).
std::string isolate_name_service(const std::filesystem::path& dir) {
  if (::geteuid() != 0) return "needs root";
  // A network namespace too: the test's name server takes port 53 on loopback, which the
  // host's own resolver may hold.
  if (::unshare(CLONE_NEWNS | CLONE_NEWNET) != 0)
    return std::string("unshare(CLONE_NEWNS | CLONE_NEWNET): ") + strerror(errno);
  const int any = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  ifreq loopback{};
  std::strncpy(loopback.ifr_name, "lo", IFNAMSIZ - 1);
  const bool up = any >= 0 && ::ioctl(any, SIOCGIFFLAGS, &loopback) == 0 &&
                  (loopback.ifr_flags |= IFF_UP, ::ioctl(any, SIOCSIFFLAGS, &loopback) == 0);
  if (any >= 0) ::close(any);
  if (!up) return std::string("bringing loopback up: ") + strerror(errno);
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0)
    return std::string("making / private: ") + strerror(errno);
  const auto resolv = dir / "resolv.conf";
  const auto nsswitch = dir / "nsswitch.conf";
  std::ofstream(resolv) << "nameserver " << kNameServerAddress
                        << "\noptions timeout:" << kResolverTimeoutSeconds
                        << " attempts:" << kResolverAttempts << "\n";
  std::ofstream(nsswitch) << "hosts: files dns\n";
  for (const auto& [mine, system] :
       {std::pair{resolv, "/etc/resolv.conf"}, std::pair{nsswitch, "/etc/nsswitch.conf"}})
    if (::mount(mine.c_str(), system, nullptr, MS_BIND, nullptr) != 0)
      return "bind-mounting " + mine.string() + " over " + system + ": " + strerror(errno);
  return {};
}

}  // namespace

int main(int argc, char** argv) {
  cohort::test::TempDir dir("cohort-name-service");
  if (const std::string why = isolate_name_service(dir.path()); !why.empty()) {
    std::printf("cannot give this test a name service of its own (%s): skipping\n", why.c_str());
    return 77;
  }
  return cohort::test::run_catch_session(argc, argv);
}
