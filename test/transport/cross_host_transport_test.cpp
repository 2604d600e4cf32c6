// The transport of a world whose ranks span hosts, simulated on one machine: each rank enters a
// UTS namespace of its own and takes its "host"'s hostname, so ranks on different simulated hosts
// have different host identities and reach each other over UCX's TCP, as on separate machines.
// What is checked here is cohort's configuration of UCX for such worlds (ucx_context.cpp): eager
// sends between hosts, behaviour a rendezvous could not show, and nothing of it on one host.
// Needs root for the namespaces; exits 77 (meson: SKIP) without.

#include "transport/host_span.hpp"
#include "transport/tag.hpp"
#include "transport/transport.hpp"
#include "transport/ucx/ucx_context.hpp"

#include <cohort/error.hpp>
#include <cohort/launch.hpp>
#include <cohort/store.hpp>

#include "catch_session.hpp"
#include "rank_helpers.hpp"
#include "support/scoped_env.hpp"
#include "support/simulated_hosts.hpp"

#include <catch2/catch.hpp>

#include <sched.h>

#include <cstdint>
#include <cstdio>
#include <set>
#include <span>
#include <string>
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

std::uint8_t pattern(int from, int to, std::size_t i) {
  return static_cast<std::uint8_t>(from * 131 + to * 31 + static_cast<int>(i) * 7);
}

/// No UCX setting of the caller's that would change the paths checked here.
struct CleanUcxEnvironment {
  ScopedEnv tls{"UCX_TLS", std::nullopt}, threshold{"UCX_RNDV_THRESH", std::nullopt},
      protocols{"UCX_PROTO_ENABLE", std::nullopt};
};

TEST_CASE("across hosts over TCP, messages leave before their receive exists (eager sends)",
          "[transport][multiproc][cross-host]") {
  // UCX's own choice over TCP is a rendezvous from 8 KiB: a send of 1 MiB cannot complete before
  // the receiver matches it, however much the receiver progresses, and rank 0's wait would pass
  // its deadline. The receivers drive UCX meanwhile (waiting for a marker rank 0 sends only after
  // its sends completed), so an eager message's bytes never wait on the kernel's socket buffers.
  // Ranks on different simulated hosts reach each other over TCP: their endpoints handle peer
  // failure, which UCX's shared-memory transports do not. A second rank on rank 0's host
  // (layouts {0, 0, 1} and {0, 1, 1, 0}) makes the world's span a thing the ranks must agree on.
  const CleanUcxEnvironment clean;  // before the check below, which reads UCX_TLS
  if (ucx::ucx_has_rdma()) {
    WARN("UCX has an RDMA device here, with which cohort leaves UCX's threshold alone: skipped");
    return;
  }
  const std::vector<int> layout =
      GENERATE(std::vector<int>{0, 1}, std::vector<int>{0, 0, 1}, std::vector<int>{0, 1, 1, 0});
  CAPTURE(layout);
  REQUIRE_NOTHROW(cohort::launch(
      static_cast<int>(layout.size()),
      [&layout](const cohort::Environment& env) {
        cohort::test::become_simulated_host(layout[static_cast<std::size_t>(env.rank)]);
        auto store = open_store(env);
        auto t = connect(*store, env);
        expect(t->description().find("rndv_thresh=inf") != std::string::npos,
               "the transport of a world across hosts asks for eager sends: " + t->description());
        constexpr std::size_t kBytes = 1 << 20;
        const auto host = [&layout](int rank) { return layout[static_cast<std::size_t>(rank)]; };
        const auto message_tag = [](int to) {
          return op_tag(7, static_cast<std::uint32_t>(to), 0);
        };
        const auto marker_tag = [](int to) { return op_tag(8, static_cast<std::uint32_t>(to), 0); };
        if (env.rank == 0) {
          std::vector<int> elsewhere;  // ranks on another host than rank 0's
          for (int r = 1; r < env.world_size; ++r)
            if (host(r) != host(0)) elsewhere.push_back(r);
          std::vector<std::vector<std::uint8_t>> out;
          std::vector<Request> sends;
          for (int p : elsewhere) {
            std::vector<std::uint8_t> data(kBytes);
            for (std::size_t i = 0; i < kBytes; ++i) data[i] = pattern(0, p, i);
            out.push_back(std::move(data));
            sends.push_back(t->post_send(p, out.back().data(), kBytes, message_tag(p)));
          }
          t->wait(sends, after(20s), "eager sends to other hosts before any receive");
          std::vector<Request> markers;
          std::uint8_t mark = 1;
          for (int p : elsewhere) markers.push_back(t->post_send(p, &mark, 1, marker_tag(p)));
          t->wait(markers, after(20s), "the markers");
        } else if (host(env.rank) != host(0)) {
          std::uint8_t mark = 0;
          const Request m = t->post_recv(0, &mark, 1, marker_tag(env.rank));
          t->wait(std::span<const Request>(&m, 1), after(30s), "the marker after the sends");
          std::vector<std::uint8_t> in(kBytes, 0xEE);
          const Request r = t->post_recv(0, in.data(), kBytes, message_tag(env.rank));
          t->wait(std::span<const Request>(&r, 1), after(30s), "receive after the send completed");
          for (std::size_t i = 0; i < kBytes; ++i)
            expect(in[i] == pattern(0, env.rank, i),
                   "byte " + std::to_string(i) + " of the eager message");
        }
        barrier(*store, "done", env.rank, env.world_size);
      },
      bounded()));
}

TEST_CASE("a host's CPUs are the union of its own ranks' affinity masks only",
          "[transport][multiproc][cross-host]") {
  // Rank r is bound to the r-th CPU of the job's (in turn): a host counts the distinct CPUs of
  // the ranks on it, not those of ranks on the other host.
  const std::vector<int> layout =
      GENERATE(std::vector<int>{0, 1}, std::vector<int>{0, 0, 1}, std::vector<int>{0, 1, 1, 0, 0});
  CAPTURE(layout);
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  REQUIRE(sched_getaffinity(0, sizeof allowed, &allowed) == 0);
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
  const auto cpu_of = [&cpus](int rank) {
    return cpus[static_cast<std::size_t>(rank) % cpus.size()];
  };
  REQUIRE_NOTHROW(cohort::launch(
      static_cast<int>(layout.size()),
      [&](const cohort::Environment& env) {
        const int host = layout[static_cast<std::size_t>(env.rank)];
        cohort::test::become_simulated_host(host);
        cpu_set_t mine;
        CPU_ZERO(&mine);
        CPU_SET(cpu_of(env.rank), &mine);
        expect(sched_setaffinity(0, sizeof mine, &mine) == 0, "sched_setaffinity");
        std::set<int> host_cpus;
        for (int r = 0; r < env.world_size; ++r)
          if (layout[static_cast<std::size_t>(r)] == host) host_cpus.insert(cpu_of(r));
        auto store = open_store(env);
        auto t = connect(*store, env);
        expect(t->host_cpus() == host_cpus.size(), "host_cpus " + std::to_string(t->host_cpus()) +
                                                       ", expected " +
                                                       std::to_string(host_cpus.size()));
        barrier(*store, "done", env.rank, env.world_size);
      },
      bounded()));
}

TEST_CASE(
    "a user's UCX_RNDV_THRESH wins across hosts; a rendezvous send to another host that is never "
    "received fails at its deadline, and the rank tears down cleanly",
    "[transport][multiproc][cross-host]") {
  // The user's threshold makes 1 MiB a rendezvous, which rank 1 never matches. With that send
  // abandoned in flight, UCX 1.13 aborted when rank 0's worker was destroyed (ucp_ep.c,
  // "proto_reqs"); the endpoint is now closed by force (UcxHub::Peer::abandoned_send). Rank 1
  // stays alive and progressing until rank 0 has torn down, so rank 0's send is pending, not
  // failed, when it goes.
  const CleanUcxEnvironment clean;
  const ScopedEnv threshold("UCX_RNDV_THRESH", "64K");
  REQUIRE_NOTHROW(cohort::launch(
      2,
      [](const cohort::Environment& env) {
        cohort::test::become_simulated_host(env.rank);
        auto store = open_store(env);
        auto t = connect(*store, env);
        expect(t->description().find("rndv_thresh=64K (UCX_RNDV_THRESH)") != std::string::npos,
               "the user's threshold wins, and is named: " + t->description());
        constexpr std::size_t kBytes = 1 << 20;
        if (env.rank == 0) {
          std::vector<std::uint8_t> data(kBytes, 7);
          const Request s = t->post_send(1, data.data(), kBytes, op_tag(9, 1, 0));
          bool timed_out = false;
          try {
            t->wait(std::span<const Request>(&s, 1), after(1s), "a send nobody receives");
          } catch (const cohort::Error& e) {
            timed_out = e.code() == cohort::ErrorCode::Timeout;
          }
          expect(timed_out, "the unreceived rendezvous send fails at its deadline");
          t.reset();
          store->set_string("rank 0 torn down", "1");
        } else {
          // Progressing all along (UCX takes the announcement in as an unexpected message), with
          // a receive of another tag that never comes. Rank 0's forced close may reach this rank
          // as rank 0's failure first: it has left.
          std::uint8_t never = 0;
          const Request r = t->post_recv(0, &never, 1, op_tag(9, 2, 0));
          const auto until = std::chrono::steady_clock::now() + 30s;
          while (!store->check({"rank 0 torn down"})) {
            try {
              expect(!t->test(r), "a message nobody sent");
            } catch (const cohort::Error& e) {
              expect(e.code() == cohort::ErrorCode::RemoteError,
                     std::string("only rank 0's leaving fails the receive: ") + e.what());
              break;  // rank 0 has left; the store says when it is done
            }
            expect(std::chrono::steady_clock::now() < until, "rank 0 tore down in time");
          }
          store->get("rank 0 torn down", 30s);
        }
      },
      bounded()));
}

}  // namespace

int main(int argc, char** argv) {
  if (!cohort::test::can_simulate_hosts()) {
    std::printf("needs root to simulate hosts with UTS namespaces: skipping\n");
    return 77;
  }
  return cohort::test::run_catch_session(argc, argv);
}
