// The Store contract, checked identically against the in-process store, a TcpStore client and a
// PrefixStore over a TcpStore: set/get, counters, compare_set, wait/check, erase, deadlines.

#include <cohort/environment.hpp>
#include <cohort/error.hpp>
#include <cohort/store.hpp>

#include "support/blocked_thread.hpp"

#include <catch2/catch.hpp>

#include <atomic>
#include <thread>

using namespace cohort;
using namespace std::chrono_literals;

namespace {

Bytes bytes_of(std::string_view text) {
  return Bytes(text.begin(), text.end());
}

// Holds what a Store under test needs to stay alive (a server for TCP variants).
struct StoreFixture {
  std::unique_ptr<TcpStoreServer> server;
  std::shared_ptr<Store> store;
  std::function<std::shared_ptr<Store>()> another_client;
};

StoreFixture make_fixture(const std::string& kind) {
  StoreFixture f;
  if (kind == "local") {
    f.store = make_local_store();
    auto shared = f.store;
    f.another_client = [shared] { return shared; };
    return f;
  }
  TcpStoreOptions options;
  options.token = "semantics-token";
  f.server = std::make_unique<TcpStoreServer>(options);
  options.port = f.server->port();
  f.another_client = [options] { return std::make_shared<TcpStore>(options); };
  f.store = f.another_client();
  if (kind == "prefix") {
    f.another_client = [options] {
      return std::make_shared<PrefixStore>("job7", std::make_shared<TcpStore>(options));
    };
    f.store = f.another_client();
  }
  return f;
}

}  // namespace

TEST_CASE("Store contract holds for local, tcp and prefixed stores", "[store][unit]") {
  const std::string kind =
      GENERATE(std::string("local"), std::string("tcp"), std::string("prefix"));
  INFO("store kind " << kind);
  StoreFixture f = make_fixture(kind);
  Store& s = *f.store;

  SECTION("set then get returns the bytes, including empty and binary values") {
    s.set("a", bytes_of("hello"));
    CHECK(s.get("a", 1s) == bytes_of("hello"));
    s.set("empty", {});
    CHECK(s.get("empty", 1s).empty());
    Bytes binary{0, 255, 1, 0, 7};
    s.set("bin", binary);
    CHECK(s.get("bin", 1s) == binary);
    s.set("a", bytes_of("again"));
    CHECK(s.get_string("a", 1s) == "again");
  }

  SECTION("add is a decimal counter that get() can read and set() can seed") {
    CHECK(s.add("ctr", 5) == 5);
    CHECK(s.add("ctr", -7) == -2);
    CHECK(s.get_string("ctr", 1s) == "-2");
    s.set_string("seeded", "40");
    CHECK(s.add("seeded", 2) == 42);
    CHECK(s.add("fresh", 0) == 0);
    s.set_string("text", "not a number");
    try {
      s.add("text", 1);
      FAIL("add on text succeeded");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::InvalidArgument);
      CHECK_THAT(e.message(), Catch::Contains("text"));
    }
    // The connection stays usable after a refused add.
    CHECK(s.add("ctr", 2) == 0);
  }

  SECTION("compare_set swaps only on a match and treats empty expected as absent") {
    CHECK(s.compare_set("cas", {}, bytes_of("first")) == bytes_of("first"));
    CHECK(s.compare_set("cas", {}, bytes_of("second")) == bytes_of("first"));
    CHECK(s.compare_set("cas", bytes_of("wrong"), bytes_of("third")) == bytes_of("first"));
    CHECK(s.compare_set("cas", bytes_of("first"), bytes_of("fourth")) == bytes_of("fourth"));
    CHECK(s.get_string("cas", 1s) == "fourth");
    CHECK(s.compare_set("absent", bytes_of("x"), bytes_of("y")).empty());
    CHECK_FALSE(s.check({"absent"}));
  }

  SECTION("check, erase and num_keys") {
    const auto before = s.num_keys();
    CHECK_FALSE(s.check({"k1"}));
    s.set_string("k1", "1");
    s.set_string("k2", "2");
    CHECK(s.check({"k1", "k2"}));
    CHECK_FALSE(s.check({"k1", "k3"}));
    CHECK(s.num_keys() == before + 2);
    CHECK(s.erase("k1"));
    CHECK_FALSE(s.erase("k1"));
    CHECK_FALSE(s.check({"k1"}));
    CHECK(s.num_keys() == before + 1);
  }

  SECTION("get and wait time out naming the missing keys") {
    s.set_string("present", "1");
    try {
      s.get("never", 50ms);
      FAIL("get returned");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::Timeout);
      CHECK_THAT(e.message(), Catch::Contains("never"));
    }
    try {
      s.wait({"present", "missing-one", "missing-two"}, 50ms);
      FAIL("wait returned");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::Timeout);
      CHECK_THAT(e.message(), Catch::Contains("missing-one") && Catch::Contains("missing-two"));
      CHECK_THAT(e.message(), !Catch::Contains("present"));
    }
    // A zero timeout on a present key succeeds; the store is still usable after timeouts.
    CHECK(s.get_string("present", 0ms) == "1");
    s.wait({"present"}, 0ms);
  }

  SECTION("a blocked get is released by a later set from another client") {
    auto other = f.another_client();
    // The set must come once the get is blocked, or the get would simply find the key. The local
    // store's get sleeps on a condition variable; a TCP client's sleeps in poll() once its
    // request is on the wire, and the server, which serves the connections of one poll round in
    // the order it accepted them, parks that request before it reads the later client's set.
    const pid_t getter = test::current_thread_id();
    const test::BlockedIn blocked_in =
        kind == "local" ? test::BlockedIn::ConditionVariable : test::BlockedIn::FileDescriptor;
    std::atomic<bool> get_was_blocked{false};
    std::thread setter([&] {
      get_was_blocked = test::wait_until_blocked(getter, blocked_in, 10s);
      other->set_string("late", "arrived");
      other->add("late-counter", 3);
    });
    CHECK(s.get_string("late", 10s) == "arrived");
    setter.join();
    CHECK(get_was_blocked);
    s.wait({"late", "late-counter"}, 10s);
    CHECK(s.get_string("late-counter", 1s) == "3");
  }

  SECTION("the longest timeout means 'as long as it takes', not an overflowed deadline") {
    // now + milliseconds::max() overflows; it used to make a TCP get time out at once.
    constexpr auto forever = std::chrono::milliseconds::max();
    auto other = f.another_client();
    const pid_t getter = test::current_thread_id();
    const test::BlockedIn blocked_in =
        kind == "local" ? test::BlockedIn::ConditionVariable : test::BlockedIn::FileDescriptor;
    std::thread setter([&] {
      test::wait_until_blocked(getter, blocked_in, 10s);
      other->set_string("eventually", "here");
    });
    std::string got;
    try {
      got = s.get_string("eventually", forever);
    } catch (...) {
      setter.join();
      throw;
    }
    setter.join();
    CHECK(got == "here");
    s.wait({"eventually"}, forever);
  }

  SECTION("negative timeouts are refused") {
    CHECK_THROWS_MATCHES(s.get("x", -1ms), Error, Catch::Predicate<Error>([](const Error& e) {
                           return e.code() == ErrorCode::InvalidArgument;
                         }));
  }
}

TEST_CASE("PrefixStore puts keys under '<prefix>/'", "[store][unit]") {
  auto inner = make_local_store();
  PrefixStore a("a", inner), b("b", inner);
  a.set_string("k", "from a");
  b.set_string("k", "from b");
  CHECK(inner->get_string("a/k", 0ms) == "from a");
  CHECK(inner->get_string("b/k", 0ms) == "from b");
  CHECK(a.get_string("k", 0ms) == "from a");
  CHECK(a.add("n", 1) == 1);
  CHECK(inner->check({"a/n"}));
  CHECK_FALSE(inner->check({"b/n"}));
  try {
    a.wait({"k", "zzz"}, 10ms);
    FAIL("wait returned");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::Timeout);
    CHECK_THAT(e.message(), Catch::Contains("a/zzz"));
  }
  CHECK(a.num_keys() == 3);
  CHECK_THROWS_AS(PrefixStore("p", nullptr), Error);
}
