// The transport with real processes (cohort::launch), a real TCP store and real UCX: every pair
// of ranks exchanges data in every posting order, large messages take the rendezvous path,
// same-tag messages keep their order, and failures (a silent peer, a dead peer, a size mismatch)
// come back as the right Error naming the peer instead of hanging. Checks run inside the ranks;
// a failed check throws, which fails the rank and so the launch.

#include "core/tunables.hpp"
#include "transport/transport_factory.hpp"
#include "transport/ucx/ucx_context.hpp"
#include "transport/ucx/ucx_hub.hpp"

#include <cohort/error.hpp>
#include <cohort/launch.hpp>
#include <cohort/store.hpp>

#include "rank_helpers.hpp"
#include "support/scoped_env.hpp"

#include <catch2/catch.hpp>

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace cohort::transport;
using namespace std::chrono_literals;

using cohort::test::after;
using cohort::test::barrier;
using cohort::test::bounded;
using cohort::test::connect;
using cohort::test::expect;
using cohort::test::open_store;
using cohort::test::ScopedEnv;

/// Waits for the one request `request` (a post_send or post_recv result) for at most `timeout`.
void wait_one(Transport& t, Request request, std::chrono::milliseconds timeout,
              const std::string& what) {
  t.wait(std::span<const Request>(&request, 1), after(timeout), what);
}

std::uint8_t pattern(int from, int to, std::size_t i, int salt) {
  return static_cast<std::uint8_t>(from * 131 + to * 31 + static_cast<int>(i) * 7 + salt);
}

std::vector<std::uint8_t> payload(int from, int to, std::size_t bytes, int salt) {
  std::vector<std::uint8_t> data(bytes);
  for (std::size_t i = 0; i < bytes; ++i) data[i] = pattern(from, to, i, salt);
  return data;
}

void expect_payload(const std::vector<std::uint8_t>& data, int from, int to, int salt) {
  for (std::size_t i = 0; i < data.size(); ++i)
    if (data[i] != pattern(from, to, i, salt))
      throw std::runtime_error("wrong byte " + std::to_string(i) + " of " +
                               std::to_string(data.size()) + " from rank " + std::to_string(from) +
                               " to rank " + std::to_string(to));
}

/// Every rank exchanges a message with every rank (itself included): all receives posted
/// first, then all sends, then one wait.
void all_pairs(Transport& t, std::size_t (*size_of)(int, int), int salt) {
  const int me = t.rank(), n = t.size();
  std::vector<std::vector<std::uint8_t>> in(static_cast<std::size_t>(n)), out(in.size());
  std::vector<Request> requests;
  for (int p = 0; p < n; ++p) {
    in[static_cast<std::size_t>(p)].assign(size_of(p, me), 0);
    requests.push_back(t.post_recv(p, in[static_cast<std::size_t>(p)].data(),
                                   in[static_cast<std::size_t>(p)].size(),
                                   op_tag(1, static_cast<std::uint32_t>(salt), 0)));
  }
  for (int p = 0; p < n; ++p) {
    out[static_cast<std::size_t>(p)] = payload(me, p, size_of(me, p), salt);
    requests.push_back(t.post_send(p, out[static_cast<std::size_t>(p)].data(),
                                   out[static_cast<std::size_t>(p)].size(),
                                   op_tag(1, static_cast<std::uint32_t>(salt), 0)));
  }
  t.wait(requests, after(30s), "all-pairs #" + std::to_string(salt));
  for (int p = 0; p < n; ++p) expect_payload(in[static_cast<std::size_t>(p)], p, me, salt);
}

/// Rank 0 bounces a counter off every other rank `rounds` times.
void ping_pong(Transport& t, int rounds) {
  for (int peer = 1; peer < t.size(); ++peer) {
    for (int round = 0; round < rounds; ++round) {
      const Tag tag =
          op_tag(2, static_cast<std::uint32_t>(peer), static_cast<std::uint32_t>(round));
      std::int64_t value = 0;
      if (t.rank() == 0) {
        value = peer * 1000 + round;
        wait_one(t, t.post_send(peer, &value, sizeof value, tag), 30s, "ping");
        wait_one(t, t.post_recv(peer, &value, sizeof value, tag), 30s, "pong");
        expect(value == -(peer * 1000 + round), "pong value");
      } else if (t.rank() == peer) {
        wait_one(t, t.post_recv(0, &value, sizeof value, tag), 30s, "ping");
        expect(value == peer * 1000 + round, "ping value");
        value = -value;
        wait_one(t, t.post_send(0, &value, sizeof value, tag), 30s, "pong");
      }
    }
  }
}

std::size_t mixed_size(int from, int to) {
  return 1 + 997u * static_cast<std::size_t>(from * 3 + to);
}
std::size_t rndv_size(int from, int to) {
  return (256u << 10) + static_cast<std::size_t>(from + to);
}
std::size_t zero_size(int, int) {
  return 0;
}

}  // namespace

TEST_CASE("ping-pong and all-pairs exchange", "[transport][multiproc]") {
  const int world_size = GENERATE(1, 2, 3, 4, 5);
  CAPTURE(world_size);
  REQUIRE_NOTHROW(cohort::launch(
      world_size,
      [](const cohort::Environment& env) {
        auto store = open_store(env);
        auto t = connect(*store, env);
        expect(t->rank() == env.rank && t->size() == env.world_size, "rank and size");
        ping_pong(*t, 20);
        all_pairs(*t, mixed_size, 1);
        all_pairs(*t, rndv_size, 2);
        all_pairs(*t, zero_size, 3);
        barrier(*store, "done", env.rank, env.world_size);
      },
      bounded()));
}

TEST_CASE("receive posted after the send and before it; no spinning", "[transport][multiproc]") {
  const int world_size = GENERATE(2, 3);
  CAPTURE(world_size);
  REQUIRE_NOTHROW(cohort::launch(
      world_size,
      [](const cohort::Environment& env) {
        // Spin budget 0: every wait sleeps on the event fd, so wakeups must work.
        setenv("COHORT_SPIN_US", "0", 1);
        cohort::reload_tunables();  // below init(), nothing else re-reads it
        auto store = open_store(env);
        auto t = connect(*store, env);
        const int last = env.world_size - 1;
        for (const std::size_t bytes : {std::size_t{64}, std::size_t{1} << 20}) {
          const std::string round = std::to_string(bytes);
          // Send first: rank 0 posts its send, and only then does the last rank post the receive.
          if (env.rank == 0) {
            const auto data = payload(0, last, bytes, 5);
            const Request s = t->post_send(last, data.data(), bytes, op_tag(3, 1, 0));
            store->set_string("sent/" + round, "1");
            t->wait(std::span<const Request>(&s, 1), after(30s), "send before recv");
          } else if (env.rank == last) {
            store->get("sent/" + round, 30s);
            std::vector<std::uint8_t> data(bytes);
            wait_one(*t, t->post_recv(0, data.data(), bytes, op_tag(3, 1, 0)), 30s,
                     "recv after send");
            expect_payload(data, 0, last, 5);
          }
          // Receive first: the last rank posts, rank 0 sends once it knows.
          if (env.rank == last) {
            std::vector<std::uint8_t> data(bytes);
            const Request r = t->post_recv(0, data.data(), bytes, op_tag(3, 2, 0));
            store->set_string("posted/" + round, "1");
            t->wait(std::span<const Request>(&r, 1), after(30s), "recv before send");
            expect_payload(data, 0, last, 6);
          } else if (env.rank == 0) {
            store->get("posted/" + round, 30s);
            const auto data = payload(0, last, bytes, 6);
            wait_one(*t, t->post_send(last, data.data(), bytes, op_tag(3, 2, 0)), 30s,
                     "send after recv");
          }
        }
        barrier(*store, "done", env.rank, env.world_size);
      },
      bounded()));
}

TEST_CASE("messages of 16 and 32 KiB leave before their receive exists (UCX eager, 33K elements)",
          "[transport][multiproc]") {
  // With UCX's default shared-memory element (8256 bytes) these go by rendezvous, and a send
  // cannot complete before the receiver matches it: rank 0's wait would pass its deadline. This
  // is the test that shows cohort's default (apply_cohort_defaults) takes effect in UCX. The
  // ranks inherit no UCX setting of the caller's that would change the path.
  const int world_size = GENERATE(2, 3);
  CAPTURE(world_size);
  const ScopedEnv tls("UCX_TLS", std::nullopt), rndv("UCX_RNDV_THRESH", std::nullopt),
      mm("UCX_MM_SEG_SIZE", std::nullopt), sysv("UCX_SYSV_SEG_SIZE", std::nullopt),
      posix("UCX_POSIX_SEG_SIZE", std::nullopt), xpmem("UCX_XPMEM_SEG_SIZE", std::nullopt),
      err("COHORT_UCX_ERR_HANDLING", std::nullopt);
  REQUIRE_NOTHROW(cohort::launch(
      world_size,
      [](const cohort::Environment& env) {
        auto store = open_store(env);
        auto t = connect(*store, env);
        const std::size_t sizes[] = {16u << 10, 32u << 10};
        if (env.rank == 0) {
          std::vector<std::vector<std::uint8_t>> out;
          std::vector<Request> sends;
          for (int p = 1; p < env.world_size; ++p) {
            for (std::uint32_t k = 0; k < 2; ++k) {
              out.push_back(payload(0, p, sizes[k], 40 + static_cast<int>(k)));
              sends.push_back(t->post_send(p, out.back().data(), sizes[k], op_tag(5, k, 0)));
            }
          }
          t->wait(sends, after(20s), "eager sends before any receive");
          store->set_string("eager sends done", "1");
        } else {
          store->get("eager sends done", 30s);
          for (std::uint32_t k = 0; k < 2; ++k) {
            std::vector<std::uint8_t> data(sizes[k]);
            wait_one(*t, t->post_recv(0, data.data(), sizes[k], op_tag(5, k, 0)), 30s,
                     "receive after the send completed");
            expect_payload(data, 0, env.rank, 40 + static_cast<int>(k));
          }
        }
        barrier(*store, "done", env.rank, env.world_size);
      },
      bounded()));
}

TEST_CASE(
    "cohort's UCX defaults: set unless the user set the variable or UCX_TLS leaves no "
    "shared-memory transport; eager sends only between hosts over TCP",
    "[transport]") {
  // Which names are set; whether UCX then uses them is the tests around this one's to show.
  struct Config {
    ucp_config_t* config = nullptr;
    Config() { REQUIRE(ucp_config_read(nullptr, nullptr, &config) == UCS_OK); }
    ~Config() { ucp_config_release(config); }
  };
  const char* variables[] = {"UCX_MM_SEG_SIZE", "UCX_SYSV_SEG_SIZE", "UCX_POSIX_SEG_SIZE",
                             "UCX_XPMEM_SEG_SIZE"};
  std::vector<std::unique_ptr<ScopedEnv>> cleared;
  for (const char* variable : variables)
    cleared.push_back(std::make_unique<ScopedEnv>(variable, std::nullopt));
  const ScopedEnv threshold("UCX_RNDV_THRESH", std::nullopt);
  const std::vector<std::string> element{"MM_SEG_SIZE"}, both{"MM_SEG_SIZE", "RNDV_THRESH"},
      eager{"RNDV_THRESH"};
  SECTION("nothing set by the user") {
    const ScopedEnv tls("UCX_TLS", std::nullopt);
    Config one_host, across_tcp;
    CHECK(ucx::apply_cohort_defaults(one_host.config, false) == element);
    CHECK(ucx::apply_cohort_defaults(across_tcp.config, true) == both);
  }
  SECTION("each of the element size's variables set by the user") {
    const ScopedEnv tls("UCX_TLS", std::nullopt);
    for (const char* variable : variables) {
      CAPTURE(variable);
      const ScopedEnv set(variable, "8256");
      Config one_host, across_tcp;
      CHECK(ucx::apply_cohort_defaults(one_host.config, false).empty());
      CHECK(ucx::apply_cohort_defaults(across_tcp.config, true) == eager);
    }
  }
  SECTION("the threshold set by the user") {
    const ScopedEnv tls("UCX_TLS", std::nullopt);
    const ScopedEnv set("UCX_RNDV_THRESH", "64K");
    Config one_host, across_tcp;
    CHECK(ucx::apply_cohort_defaults(one_host.config, false) == element);
    CHECK(ucx::apply_cohort_defaults(across_tcp.config, true) == element);
  }
  SECTION("UCX_TLS with and without a shared-memory transport") {
    for (const char* with : {"sm,self", "shm,tcp", "posix,self", "sysv", "all", "^sysv", "^tcp"}) {
      CAPTURE(with);
      const ScopedEnv tls("UCX_TLS", with);
      Config one_host, across_tcp;
      CHECK(ucx::apply_cohort_defaults(one_host.config, false) == element);
      CHECK(ucx::apply_cohort_defaults(across_tcp.config, true) == both);
    }
    for (const char* without : {"tcp", "tcp,self", "^sm", "^shm", "^posix,sysv", "^all"}) {
      CAPTURE(without);
      const ScopedEnv tls("UCX_TLS", without);
      Config one_host, across_tcp;
      CHECK(ucx::apply_cohort_defaults(one_host.config, false).empty());
      CHECK(ucx::apply_cohort_defaults(across_tcp.config, true) == eager);
    }
  }
}

TEST_CASE("RDMA transports in UCX_TLS", "[transport]") {
  for (const char* with : {"", "all", "rc,sm", "rc_x", "dc_mlx5,self", "ud", "ib", "tcp,rc_v",
                           "rc_verbs,sm,self", "ud_verbs", "^tcp", "^rc", "^posix,sysv"}) {
    CAPTURE(with);
    CHECK(ucx::rdma_in_transport_list(with));
  }
  CHECK(ucx::rdma_in_transport_list(nullptr));
  for (const char* without : {"tcp", "tcp,self", "sm,self", "posix,cma", "^ib", "^all"}) {
    CAPTURE(without);
    CHECK_FALSE(ucx::rdma_in_transport_list(without));
  }
  // Whatever the hardware: a transport list without RDMA leaves UCX only TCP between hosts.
  const ScopedEnv tls("UCX_TLS", "tcp,self,sm");
  CHECK_FALSE(ucx::ucx_has_rdma());
}

TEST_CASE("a world on one host leaves UCX's rendezvous threshold alone", "[transport][multiproc]") {
  // Its context is the one-host kind: no rndv_thresh in the transport's description (which
  // names cohort's or the user's setting, see cross_host_transport_test for worlds across hosts).
  const int world_size = GENERATE(2, 3);
  CAPTURE(world_size);
  const ScopedEnv threshold("UCX_RNDV_THRESH", std::nullopt);
  REQUIRE_NOTHROW(cohort::launch(
      world_size,
      [](const cohort::Environment& env) {
        auto store = open_store(env);
        auto t = connect(*store, env);
        expect(t->description().find("rndv_thresh") == std::string::npos,
               "nothing set on one host: " + t->description());
        barrier(*store, "done", env.rank, env.world_size);
      },
      bounded()));
}

/// The CPUs this process may run on, read with the kernel's own macros (not cpu_set.hpp's).
std::vector<int> allowed_cpus() {
  cpu_set_t mask;
  CPU_ZERO(&mask);
  if (sched_getaffinity(0, sizeof mask, &mask) != 0) return {};
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &mask)) cpus.push_back(c);
  return cpus;
}

void bind_to(int cpu) {
  cpu_set_t mask;
  CPU_ZERO(&mask);
  CPU_SET(cpu, &mask);
  expect(sched_setaffinity(0, sizeof mask, &mask) == 0, "sched_setaffinity");
}

TEST_CASE("a host's CPUs are the union of its ranks' affinity masks", "[transport][multiproc]") {
  // What the wait policy counts: ranks confined together to one CPU must know they share it,
  // and ranks bound each to a CPU of its own must not think they share one.
  const int world_size = GENERATE(1, 2, 3, 4, 5);
  const int layout = GENERATE(0, 1, 2);  // unbound; all on one CPU; CPUs in turn
  CAPTURE(world_size, layout);
  const std::vector<int> cpus = allowed_cpus();  // the ranks inherit this mask
  REQUIRE_FALSE(cpus.empty());
  const int available = static_cast<int>(cpus.size());
  const unsigned expected = static_cast<unsigned>(layout == 0   ? available
                                                  : layout == 1 ? 1
                                                                : std::min(world_size, available));
  REQUIRE_NOTHROW(cohort::launch(
      world_size,
      [&](const cohort::Environment& env) {
        if (layout == 1) bind_to(cpus.front());
        if (layout == 2) bind_to(cpus[static_cast<std::size_t>(env.rank % available)]);
        auto store = open_store(env);
        auto t = connect(*store, env);
        expect(t->host_cpus() == expected, "host_cpus " + std::to_string(t->host_cpus()) +
                                               ", expected " + std::to_string(expected));
        barrier(*store, "done", env.rank, env.world_size);
      },
      bounded()));
}

TEST_CASE("16 MiB messages and same-tag ordering over rendezvous (UCX_RNDV_THRESH=1024)",
          "[transport][multiproc]") {
  const int world_size = GENERATE(2, 3);
  CAPTURE(world_size);
  REQUIRE_NOTHROW(cohort::launch(
      world_size,
      [](const cohort::Environment& env) {
        setenv("UCX_RNDV_THRESH", "1024", 1);
        auto store = open_store(env);
        auto t = connect(*store, env);
        const int n = env.world_size, me = env.rank;
        const int next = (me + 1) % n, prev = (me + n - 1) % n;
        // Ring exchange of 16 MiB: receive posted first, then the send, then one wait.
        const std::size_t big = 16u << 20;
        const auto out = payload(me, next, big, 7);
        std::vector<std::uint8_t> got(big);
        const Request ring[] = {t->post_recv(prev, got.data(), big, op_tag(4, 0, 0)),
                                t->post_send(next, out.data(), big, op_tag(4, 0, 0))};
        t->wait(ring, after(60s), "16 MiB ring");
        expect_payload(got, prev, me, 7);

        // 24 messages on one tag, alternating eager (64 B) and rendezvous (64 KiB): they must
        // arrive in posting order.
        constexpr int kMessages = 24;
        const auto size_of = [](int i) -> std::size_t { return i % 2 ? 64u << 10 : 64u; };
        std::vector<std::vector<std::uint8_t>> sends, recvs;
        std::vector<Request> requests;
        for (int i = 0; i < kMessages; ++i) {
          recvs.emplace_back(size_of(i));
          requests.push_back(t->post_recv(prev, recvs.back().data(), size_of(i), op_tag(4, 1, 0)));
        }
        for (int i = 0; i < kMessages; ++i) {
          sends.push_back(payload(me, next, size_of(i), 100 + i));
          requests.push_back(t->post_send(next, sends.back().data(), size_of(i), op_tag(4, 1, 0)));
        }
        t->wait(requests, after(60s), "same-tag ordering");
        for (int i = 0; i < kMessages; ++i)
          expect_payload(recvs[static_cast<std::size_t>(i)], prev, me, 100 + i);
        barrier(*store, "done", env.rank, env.world_size);
      },
      bounded()));
}

TEST_CASE("UCX_TLS=tcp and peer-failure handling everywhere still work", "[transport][multiproc]") {
  const char* mode = GENERATE("tls-tcp", "err-peer");
  CAPTURE(mode);
  REQUIRE_NOTHROW(cohort::launch(
      3,
      [mode](const cohort::Environment& env) {
        if (std::string(mode) == "tls-tcp")
          setenv("UCX_TLS", "tcp", 1);
        else
          setenv("COHORT_UCX_ERR_HANDLING", "peer", 1);
        cohort::reload_tunables();  // below init(), nothing else re-reads it
        auto store = open_store(env);
        auto t = connect(*store, env);
        if (std::string(mode) == "tls-tcp")
          expect(t->description().find("tls=tcp") != std::string::npos, t->description());
        ping_pong(*t, 5);
        all_pairs(*t, mixed_size, 1);
        all_pairs(*t, rndv_size, 2);
        barrier(*store, "done", env.rank, env.world_size);
      },
      bounded()));
}

TEST_CASE("a peer that never sends: Timeout naming the peer and the op", "[transport][multiproc]") {
  REQUIRE_NOTHROW(cohort::launch(
      2,
      [](const cohort::Environment& env) {
        auto store = open_store(env);
        auto t = connect(*store, env);
        if (env.rank == 1) {
          std::int32_t value = 0;
          const Request r = t->post_recv(0, &value, sizeof value, op_tag(5, 17, 2));
          try {
            t->wait(std::span<const Request>(&r, 1), after(1s), "allreduce #17 (ring)");
            throw std::runtime_error("wait on a message never sent returned");
          } catch (const cohort::Error& e) {
            expect(e.code() == cohort::ErrorCode::Timeout, std::string("code: ") + e.what());
            expect(e.message().find("allreduce #17 (ring)") != std::string::npos, e.what());
            expect(e.message().find("receive from rank 0") != std::string::npos, e.what());
            expect(e.message().find("seq 17 step 2") != std::string::npos, e.what());
          }
          t->cancel_all();
          // The cancelled receive is gone; the transport still works afterwards.
          expect(!store->check({"unused"}), "store alive");
        }
        barrier(*store, "done", env.rank, env.world_size);
        const std::int64_t mine = env.rank;
        std::int64_t theirs = -1;
        const Request exchange[] = {
            t->post_recv(1 - env.rank, &theirs, sizeof theirs, op_tag(5, 18, 0)),
            t->post_send(1 - env.rank, &mine, sizeof mine, op_tag(5, 18, 0))};
        t->wait(exchange, after(30s), "after cancel");
        expect(theirs == 1 - env.rank, "exchange after cancel_all");
      },
      bounded()));
}

TEST_CASE("a peer that dies: pending requests fail naming it, never hang",
          "[transport][multiproc]") {
  const char* mode = GENERATE("auto", "peer");
  CAPTURE(mode);
  REQUIRE_NOTHROW(cohort::launch(
      3,
      [mode](const cohort::Environment& env) {
        setenv("COHORT_UCX_ERR_HANDLING", mode, 1);
        cohort::reload_tunables();  // below init(), nothing else re-reads it
        if (env.rank == 2) {
          // Rank 2 joins the transport from a child that dies (see run_in_child_that_dies).
          cohort::test::run_in_child_that_dies([&] {
            auto store = open_store(env);
            auto t = connect(*store, env);
            store->get("posted/0", 30s);
            store->get("posted/1", 30s);
          });
          return;
        }
        auto store = open_store(env);
        auto t = connect(*store, env);
        std::vector<std::uint8_t> in_buf(1 << 20), out_buf(1 << 20, 1);
        std::vector<Request> requests;
        requests.push_back(t->post_recv(2, in_buf.data(), in_buf.size(), op_tag(6, 1, 0)));
        if (env.rank == 0)  // a rendezvous-sized send rank 2 never receives
          requests.push_back(t->post_send(2, out_buf.data(), out_buf.size(), op_tag(6, 1, 0)));
        store->set_string("posted/" + std::to_string(env.rank), "1");
        try {
          t->wait(requests, after(20s), "broadcast #1 (tree)");
          throw std::runtime_error("wait on a dead peer returned");
        } catch (const cohort::Error& e) {
          expect(
              e.code() == cohort::ErrorCode::RemoteError || e.code() == cohort::ErrorCode::Timeout,
              std::string("code: ") + e.what());
          expect(e.message().find("broadcast #1 (tree)") != std::string::npos, e.what());
          expect(e.message().find("rank 2") != std::string::npos, e.what());
        }
        t->cancel_all();
        // Ranks 0 and 1 are still fine with each other.
        if (env.rank < 2) {
          const std::int64_t mine = env.rank;
          std::int64_t theirs = -1;
          const Request exchange[] = {
              t->post_recv(1 - env.rank, &theirs, sizeof theirs, op_tag(6, 2, 0)),
              t->post_send(1 - env.rank, &mine, sizeof mine, op_tag(6, 2, 0))};
          t->wait(exchange, after(30s), "survivors");
          expect(theirs == 1 - env.rank, "survivors exchange");
        }
        t.reset();  // teardown with a dead peer is bounded
      },
      bounded()));
}

TEST_CASE("size mismatches and bad peers are errors; the connections keep working",
          "[transport][multiproc]") {
  REQUIRE_NOTHROW(cohort::launch(
      3,
      [](const cohort::Environment& env) {
        auto store = open_store(env);
        auto t = connect(*store, env);
        const int n = env.world_size, me = env.rank;
        try {
          t->post_send(n, nullptr, 0, 0);
          throw std::runtime_error("peer == size accepted");
        } catch (const cohort::Error& e) {
          expect(e.code() == cohort::ErrorCode::InvalidArgument, e.what());
          expect(e.message().find("peer rank 3") != std::string::npos, e.what());
        }
        try {
          t->post_recv(-1, nullptr, 0, 0);
          throw std::runtime_error("peer -1 accepted");
        } catch (const cohort::Error& e) {
          expect(e.code() == cohort::ErrorCode::InvalidArgument, e.what());
        }

        // Rank 0 sends 16 bytes where rank 1 expects 8 (truncation), then 4 where it expects 8.
        if (me == 0) {
          std::uint8_t data[16] = {};
          wait_one(*t, t->post_send(1, data, 16, op_tag(7, 1, 0)), 30s, "long");
          wait_one(*t, t->post_send(1, data, 4, op_tag(7, 2, 0)), 30s, "short");
        } else if (me == 1) {
          for (const std::uint32_t seq : {1u, 2u}) {
            std::uint8_t data[8];
            try {
              wait_one(*t, t->post_recv(0, data, 8, op_tag(7, seq, 0)), 30s, "mismatch");
              throw std::runtime_error("size mismatch not reported");
            } catch (const cohort::Error& e) {
              expect(e.code() == cohort::ErrorCode::InvalidArgument, e.what());
              expect(e.message().find("sizes disagree") != std::string::npos, e.what());
              expect(e.message().find("rank 0") != std::string::npos, e.what());
            }
          }
        }

        // After those errors every pair still exchanges: a ring whose send stays posted while
        // the receive is waited for, and is waited for only afterwards.
        const int next = (me + 1) % n, prev = (me + n - 1) % n;
        constexpr std::size_t kCount = 1000;
        const std::vector<float> out(kCount, static_cast<float>(me + 1));
        std::vector<float> in(kCount, 0.0f);
        const Request s = t->post_send(next, out.data(), kCount * sizeof(float), op_tag(7, 3, 0));
        wait_one(*t, t->post_recv(prev, in.data(), kCount * sizeof(float), op_tag(7, 3, 0)), 30s,
                 "ring receive");
        wait_one(*t, s, 30s, "ring send");
        for (float v : in)
          expect(v == static_cast<float>(prev + 1), "value from the previous rank");
        barrier(*store, "done", env.rank, env.world_size);
      },
      bounded()));
}

namespace {

// The sleep of sleeper_wakeup's threads, ordered through the hub's sleep hooks: which thread is
// which, and what each has reached.
thread_local char sleeper_role = '?';
std::atomic<bool> first_asleep{false};      // A counted asleep and about to poll
std::atomic<bool> second_counted{false};    // B counted asleep, held before its poll
std::atomic<bool> interrupted{false};       // the main thread interrupted B's view
std::atomic<bool> first_woke_after{false};  // A's sleep ended after that

/// Returns once `flag` is set; throws after 30 s.
void await(const std::atomic<bool>& flag, const char* what) {
  const auto until = std::chrono::steady_clock::now() + 30s;
  while (!flag.load()) {
    if (std::chrono::steady_clock::now() > until)
      throw std::runtime_error(std::string("never happened: ") + what);
    std::this_thread::yield();
  }
}

/// await(), or else ends the rank at once: the thread whose wait did not end sleeps on, and a
/// std::thread that cannot be joined would only terminate the process less clearly.
void await_wait_end(const std::atomic<bool>& ended, const char* what) {
  try {
    await(ended, what);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank 0: %s\n", e.what());
    std::_Exit(1);
  }
}

}  // namespace

TEST_CASE("an abort wakes a thread about to sleep even when another sleeper wakes first",
          "[transport][multiproc][threads]") {
  // Two threads of one process sleep in waits on one hub (two communicators' transports): A on
  // the world's, B on a view's. B is held after it counted itself asleep and before its poll()
  // until the abort of B's view has woken A and A's sleep is over. With one wake-up descriptor
  // shared by all sleepers, A drained the abort's wake-up, and B then slept its whole nap (here
  // made longer than the 30 s this test waits for B, so that loss is an error, not a delay; an
  // abort is due within about a millisecond).
  REQUIRE_NOTHROW(cohort::launch(
      2,
      [](const cohort::Environment& env) {
        auto store = open_store(env);
        auto t = connect(*store, env);
        constexpr std::uint32_t kViewId = 23;
        const int members[] = {0, 1};
        auto view = t->derive(members, env.rank, TagIdClaim(t->tag_ids(), kViewId));
        const Tag world_tag = p2p_tag(0, 5), view_tag = p2p_tag(kViewId, 5);
        if (env.rank == 1) {
          store->get("b_done", 60s);
          const std::int32_t go = 7;
          const Request s = t->post_send(0, &go, sizeof go, world_tag);
          t->wait(std::span<const Request>(&s, 1), after(30s), "the word to A");
          barrier(*store, "done", env.rank, env.world_size);
          return;
        }
        ucx::testing::SleepHooks hooks;
        hooks.before_poll = [] {
          if (sleeper_role == 'A') first_asleep.store(true);
          // A's sleep may have ended (progress, an event) before the abort came; then its next
          // sleep is what follows it.
          if (sleeper_role == 'A' && interrupted.load()) first_woke_after.store(true);
          if (sleeper_role == 'B' && !second_counted.exchange(true))
            await(first_woke_after, "A's sleep ending after the abort");
        };
        hooks.after_sleep = [] {
          if (sleeper_role == 'A' && interrupted.load()) first_woke_after.store(true);
        };
        hooks.longest_nap = 300s;  // a lost wake-up then lasts past the test's patience
        ucx::testing::set_sleep_hooks(hooks);

        std::int32_t a_value = 0, b_value = 0;
        std::thread a([&] {
          sleeper_role = 'A';
          const Request r = t->post_recv(1, &a_value, sizeof a_value, world_tag);
          t->wait(std::span<const Request>(&r, 1), after(60s), "A's receive");
        });
        std::string b_error;
        cohort::ErrorCode b_code = cohort::ErrorCode::Internal;
        std::atomic<bool> b_ended{false};
        std::thread b([&] {
          sleeper_role = 'B';
          const Request r = view->post_recv(1, &b_value, sizeof b_value, view_tag);
          try {
            view->wait(std::span<const Request>(&r, 1), after(200s), "B's receive");
            b_error = "returned";
          } catch (const cohort::Error& e) {
            b_code = e.code();
            b_error = e.what();
          } catch (const std::exception& e) {
            b_error = e.what();
          }
          b_ended.store(true);
        });
        await(first_asleep, "A asleep");
        await(second_counted, "B counted asleep");
        interrupted.store(true);
        view->interrupt("aborted: stop B");
        await_wait_end(b_ended, "B's wait ending after the abort");
        b.join();
        store->set_string("b_done", "1");
        a.join();
        ucx::testing::set_sleep_hooks({});
        view->cancel_all();
        expect(b_code == cohort::ErrorCode::InvalidUsage &&
                   b_error.find("aborted: stop B") != std::string::npos,
               "B's wait ends by the abort, not its deadline: " + b_error);
        expect(a_value == 7, "A's message arrived");
        barrier(*store, "done", env.rank, env.world_size);
      },
      bounded()));
}

namespace {
std::atomic<bool> sleeper_without_fd_asleep{false};
}  // namespace

TEST_CASE("a thread the system gives no eventfd to still ends its wait on an abort",
          "[transport][multiproc][threads]") {
  // Without a descriptor of its own nobody can wake a sleeper, so it must nap briefly and look
  // again: an abort then ends its wait within a nap. Here the longest nap is made longer than the
  // 30 s this test waits, so a sleeper that napped as long as one with a descriptor fails it.
  REQUIRE_NOTHROW(cohort::launch(
      2,
      [](const cohort::Environment& env) {
        auto store = open_store(env);
        auto t = connect(*store, env);
        if (env.rank == 1) {
          barrier(*store, "done", env.rank, env.world_size);
          return;
        }
        ucx::testing::SleepHooks hooks;
        hooks.before_poll = [] { sleeper_without_fd_asleep.store(true); };
        hooks.longest_nap = 300s;
        hooks.refuse_eventfds = true;
        ucx::testing::set_sleep_hooks(hooks);
        std::int32_t value = 0;
        std::string error;
        std::atomic<bool> ended{false};
        std::thread sleeper([&] {
          const Request r = t->post_recv(1, &value, sizeof value, p2p_tag(0, 6));
          try {
            t->wait(std::span<const Request>(&r, 1), after(200s), "the receive");
            error = "returned";
          } catch (const std::exception& e) {
            error = e.what();
          }
          ended.store(true);
        });
        await(sleeper_without_fd_asleep, "the receiver asleep");
        t->interrupt("aborted: stop");
        await_wait_end(ended, "the wait ending after the abort");
        sleeper.join();
        ucx::testing::set_sleep_hooks({});
        t->cancel_all();
        expect(error.find("aborted: stop") != std::string::npos, "ended by the abort: " + error);
        barrier(*store, "done", env.rank, env.world_size);
      },
      bounded()));
}

TEST_CASE("a cancelled send UCX still has keeps what its tag id's failed ops retain, no more",
          "[transport][multiproc]") {
  // Rank 0's 8 MiB send (tag id 6) times out before rank 1 receives it, and is cancelled: UCX
  // goes on with it. What is retained for tag id 6 stays until the send ended; what is
  // retained for tag id 7, which abandoned nothing, goes at once (a send that never ends must
  // not pin every later failure's memory). Shared memory off: UCX carries the message.
  REQUIRE_NOTHROW(cohort::launch(
      2,
      [](const cohort::Environment& env) {
        ScopedEnv no_fastboxes("COHORT_SHARED_MEMORY", "off");
        cohort::reload_tunables();
        auto store = open_store(env);
        auto t = connect(*store, env);
        constexpr std::size_t kBytes = 8 << 20;
        static std::atomic<bool> kept_released{false}, other_released{false};
        if (env.rank == 0) {
          auto data = std::make_shared<std::vector<std::uint8_t>>(kBytes);
          for (std::size_t i = 0; i < kBytes; ++i) (*data)[i] = pattern(0, 1, i, 3);
          const Request sent = t->post_send(1, data->data(), kBytes, op_tag(6, 1, 0));
          try {
            wait_one(*t, sent, 200ms, "the send nobody receives yet");
            throw std::runtime_error("the send ended before its receive was posted");
          } catch (const cohort::Error& e) {
            expect(e.code() == cohort::ErrorCode::Timeout, e.what());
          }
          t->cancel_all();
          t->retain_until_quiet(7, std::shared_ptr<void>(new int(0), [](void* p) {
                                  delete static_cast<int*>(p);
                                  other_released = true;
                                }));
          expect(other_released, "memory retained for a tag id that abandoned nothing was kept");
          t->retain_until_quiet(
              6, std::shared_ptr<void>(data.get(), [data](void*) { kept_released = true; }));
          data.reset();
          expect(!kept_released, "the cancelled send's memory was let go while UCX had it");
          store->set_string("kept/failed", "1");
        } else {
          store->get("kept/failed", 30s);
          std::vector<std::uint8_t> got(kBytes);
          wait_one(*t, t->post_recv(0, got.data(), kBytes, op_tag(6, 1, 0)), 30s, "late receive");
          for (std::size_t i = 0; i < kBytes; ++i)
            if (got[i] != pattern(0, 1, i, 3)) expect(false, "byte " + std::to_string(i));
        }
        // Rank 0 learns that the send ended through progress: rounds of an exchange of "let go
        // yet?" until it says yes, at most 1000.
        std::uint8_t mine = 0, theirs = 0;
        for (std::uint32_t round = 0; round < 1000; ++round) {
          mine = env.rank == 0 && kept_released ? 1 : 0;
          const Request exchange[] = {t->post_recv(1 - env.rank, &theirs, 1, op_tag(8, round, 0)),
                                      t->post_send(1 - env.rank, &mine, 1, op_tag(8, round, 0))};
          t->wait(exchange, after(30s), "released yet?");
          if (mine != 0 || theirs != 0) break;
        }
        expect(mine != 0 || theirs != 0, "the send's memory was kept after it ended");
      },
      bounded()));
}
