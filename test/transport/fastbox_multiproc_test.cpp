// Point-to-point messages between ranks of one host through fastboxes (transport/fastbox.hpp,
// UcxHub), with real processes, a real TCP store and real UCX: messages on both sides of the
// ring's size limit (ring and UCX) keep their order per tag and their bytes; more messages than a
// ring holds wait for room without losing order; sizes that disagree (on either side of the limit)
// fail the receive and leave the pair working; a rank with COHORT_SHARED_MEMORY=off keeps its pairs
// on UCX in both directions; a receive from a peer that dies fails naming it, waited on or polled
// by test(). Messages above 32 KiB (4 MiB where ranks outnumber hardware threads) go by
// rendezvous: the send stays pending until the receiver copied it, size disagreements fail the
// receive and complete the send, a receive ends only once its ack is in the ring back, a sender
// or receiver whose peer dies fails naming it, a receive of a send cancelled before its copy
// fails instead of delivering the buffer's later bytes, and COHORT_SINGLE_COPY=off on one rank
// keeps its pairs on UCX. A copy held up in the kernel (the sender's pages registered missing
// with a userfaultfd) holds up no other thread's exchanges, and cancelling its receive waits
// for it. Checks run inside the ranks; a failed check throws, which fails the rank
// and so the launch.

#include "core/tunables.hpp"
#include "transport/cpu_set.hpp"
#include "transport/fastbox.hpp"
#include "transport/transport_factory.hpp"
#include "transport/ucx/ucx_hub.hpp"

#include <cohort/error.hpp>
#include <cohort/launch.hpp>
#include <cohort/store.hpp>

#include "rank_helpers.hpp"
#include "support/cross_process_reads.hpp"

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <exception>
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

std::uint8_t pattern(int from, int to, std::size_t i, int salt) {
  return static_cast<std::uint8_t>(from * 131 + to * 31 + static_cast<int>(i) * 7 + salt * 13);
}

std::vector<std::uint8_t> payload(int from, int to, std::size_t bytes, int salt) {
  std::vector<std::uint8_t> data(bytes);
  for (std::size_t i = 0; i < bytes; ++i) data[i] = pattern(from, to, i, salt);
  return data;
}

void expect_payload(const std::vector<std::uint8_t>& data, int from, int to, int salt,
                    const std::string& what) {
  for (std::size_t i = 0; i < data.size(); ++i)
    if (data[i] != pattern(from, to, i, salt))
      throw std::runtime_error(what + ": wrong byte " + std::to_string(i) + " of " +
                               std::to_string(data.size()) + " from rank " + std::to_string(from));
}

void wait_all(Transport& t, const std::vector<Request>& requests, const std::string& what) {
  t.wait(requests, after(30s), what);
}

/// Sizes on both sides of the ring's limit, of UCX's eager 32 KiB, of the spread messages'
/// 512 KiB and of the rendezvous limits (above 512 KiB; above 4 MiB where ranks outnumber
/// hardware threads).
constexpr std::size_t kInline = Fastbox::kInlineBytes;
constexpr std::size_t kEagerLimit = 32 * 1024;
/// Above UCX's eager limit and up to this, messages are spread over the ring's slots, in parts
/// above the ring's size (UcxHub::kSpreadMax); rendezvous starts above it.
constexpr std::size_t kSpreadLimit = 512 * 1024;
constexpr std::size_t kOversubscribedLimit = 4 * 1024 * 1024;
// clang-format off
const std::vector<std::size_t> kSizes = {0, 4, kInline, kInline + 1, 8192, 300000, kEagerLimit,
                                         kEagerLimit + 1, kSpreadLimit, kSpreadLimit + 1,
                                         kOversubscribedLimit,
                                         kOversubscribedLimit + 1, 8, 1};
// clang-format on

/// Message k to a peer goes on user tag 5 (k even) or 6 (k odd).
Tag tag_of(std::size_t k) {
  return p2p_tag(1, k % 2 == 0 ? 5u : 6u);
}

/// Every rank sends kSizes to every other rank, all posted before any receive; then receives
/// tag 6's messages first and tag 5's after (tags are separate channels, each in send order).
void all_pairs_mixed(Transport& t, int salt) {
  const int me = t.rank(), n = t.size();
  std::vector<std::vector<std::uint8_t>> out;
  std::vector<Request> sends;
  out.reserve(kSizes.size() * static_cast<std::size_t>(n));
  for (int p = 0; p < n; ++p) {
    if (p == me) continue;
    for (std::size_t k = 0; k < kSizes.size(); ++k) {
      out.push_back(payload(me, p, kSizes[k], salt + static_cast<int>(k)));
      sends.push_back(t.post_send(p, out.back().data(), kSizes[k], tag_of(k)));
    }
  }
  for (const std::size_t parity : {std::size_t{1}, std::size_t{0}}) {
    std::vector<std::vector<std::uint8_t>> in;
    std::vector<Request> recvs;
    std::vector<std::pair<int, std::size_t>> from;
    in.reserve(kSizes.size() * static_cast<std::size_t>(n));
    for (int p = 0; p < n; ++p) {
      if (p == me) continue;
      for (std::size_t k = parity; k < kSizes.size(); k += 2) {
        in.emplace_back(kSizes[k], 0xEE);
        recvs.push_back(t.post_recv(p, in.back().data(), kSizes[k], tag_of(k)));
        from.emplace_back(p, k);
      }
    }
    wait_all(t, recvs, "receives of tag " + std::to_string(parity == 0 ? 5 : 6));
    for (std::size_t i = 0; i < in.size(); ++i)
      expect_payload(in[i], from[i].first, me, salt + static_cast<int>(from[i].second),
                     "message " + std::to_string(from[i].second));
  }
  wait_all(t, sends, "sends");
}

// Polls `r` with test(), as the communicator polls a send/recv in flight, until it completes
// (returns) or fails (throws); a test() that reports nothing within `bound` fails the rank. While
// a fastbox receive waits, test() looks at the rings every time but at UCX (its progress, its
// probe for a message too large for the ring, a dead peer) only every few calls: the tests that
// poll check that it still does.
void polled_until_done(Transport& t, const Request& r, std::chrono::seconds bound) {
  const auto until = std::chrono::steady_clock::now() + bound;
  while (std::chrono::steady_clock::now() < until)
    if (t.test(r)) return;
  throw std::runtime_error("test() reported nothing within the bound");
}

/// Whether 2 ranks here send messages above 32 KiB by rendezvous: they can read each other's
/// memory, and each has a hardware thread (else the limit is 4 MiB). Says so when not, as the
/// 2-rank tests of the rendezvous itself then skip.
bool rendezvous_runs_here() {
  // The ranks' CPUs as the hub counts them (the union of their affinity masks; forked ranks
  // inherit this process's), not the machine's: under taskset or a cpuset of one CPU the pair's
  // rendezvous starts above 4 MiB.
  const CpuSet cpus = affinity_cpus();
  unsigned count = 0;
  for (const std::uint64_t word : cpus) count += static_cast<unsigned>(std::popcount(word));
  if ((cpus.empty() ? std::thread::hardware_concurrency() : count) < 2) {
    WARN("one hardware thread: 2 ranks send only messages above 4 MiB by rendezvous");
    return false;
  }
  if (cohort::test::siblings_can_read_each_other()) return true;
  WARN("this machine does not let ranks read each other's memory: large messages stay on UCX");
  return false;
}

/// Waits on (or, `polled`, polls with test()) request `r` to rank 1, which died: it must fail
/// with RemoteError naming rank 1, not complete (`what` says what completing would mean).
void expect_dead_peer_named(Transport& t, const Request& r, bool polled, const std::string& what) {
  try {
    if (polled) {
      polled_until_done(t, r, 20s);
    } else {
      t.wait(std::span<const Request>(&r, 1), after(20s), "an op with rank 1");
    }
  } catch (const cohort::Error& e) {
    expect(e.code() == cohort::ErrorCode::RemoteError, std::string("code: ") + e.what());
    expect(e.message().find("rank 1") != std::string::npos, e.what());
    return;
  }
  throw std::runtime_error(what + " completed");
}

/// Waits on receive `r` of `expected` bytes from rank 0, which sent `sent`: it must fail with
/// "sizes disagree" naming the size sent and the rank.
void expect_sizes_disagree(Transport& t, const Request& r, std::size_t sent, std::size_t expected) {
  try {
    t.wait(std::span<const Request>(&r, 1), after(20s), "mismatch");
  } catch (const cohort::Error& e) {
    expect(e.code() == cohort::ErrorCode::InvalidArgument, e.what());
    expect(e.message().find("sizes disagree") != std::string::npos, e.what());
    expect(e.message().find("message of " + std::to_string(sent) + " bytes") != std::string::npos,
           e.what());
    expect(e.message().find("rank 0") != std::string::npos, e.what());
    return;
  }
  throw std::runtime_error("size mismatch " + std::to_string(sent) + " -> " +
                           std::to_string(expected) + " not reported");
}

/// After refused messages, the two ranks of `t` exchange `sizes` on `tag`, in turn from rank 0
/// and rank 1, each arriving whole.
void pair_still_works(Transport& t, std::span<const std::size_t> sizes, Tag tag, int salt) {
  for (std::size_t k = 0; k < sizes.size(); ++k) {
    const int from = static_cast<int>(k % 2);
    const int to = 1 - from;
    if (t.rank() == from) {
      const auto data = payload(from, to, sizes[k], salt + static_cast<int>(k));
      const Request s = t.post_send(to, data.data(), sizes[k], tag);
      t.wait(std::span<const Request>(&s, 1), after(30s), "send after mismatches");
    } else {
      std::vector<std::uint8_t> in(sizes[k], 0xEE);
      const Request r = t.post_recv(from, in.data(), sizes[k], tag);
      t.wait(std::span<const Request>(&r, 1), after(30s), "receive after mismatches");
      expect_payload(in, from, to, salt + static_cast<int>(k), "after mismatches");
    }
  }
}

}  // namespace

TEST_CASE("fastbox: every pair, sizes across the inline limit, two tags, in send order",
          "[transport][multiproc]") {
  const int world_size = GENERATE(2, 3, 5);
  CAPTURE(world_size);
  REQUIRE_NOTHROW(cohort::launch(
      world_size,
      [](const cohort::Environment& env) {
        auto store = open_store(env);
        auto t = connect(*store, env);
        all_pairs_mixed(*t, 1);
        all_pairs_mixed(*t, 2);
        barrier(*store, "done", env.rank, env.world_size);
      },
      bounded()));
}

TEST_CASE(
    "fastbox: a rank with COHORT_SHARED_MEMORY=off or COHORT_SINGLE_COPY=off keeps its "
    "pairs on UCX both ways (all messages, or the large ones)",
    "[transport][multiproc]") {
  // With COHORT_SINGLE_COPY=off, pairs 0-2 use the rendezvous above 512 KiB and pairs with
  // rank 1 UCX there (32-512 KiB go through the ring either way: spread, and for pair 0-2 by
  // rendezvous too while it measures which); both sides of each pair must agree, or the large
  // sizes of all_pairs_mixed would disagree.
  const std::string variable =
      GENERATE(as<std::string>{}, "COHORT_SHARED_MEMORY", "COHORT_SINGLE_COPY");
  CAPTURE(variable);
  REQUIRE_NOTHROW(cohort::launch(
      3,
      [&variable](const cohort::Environment& env) {
        if (env.rank == 1) {
          setenv(variable.c_str(), "off", 1);
          cohort::reload_tunables();  // below init(), nothing else re-reads it
        }
        auto store = open_store(env);
        auto t = connect(*store, env);
        all_pairs_mixed(*t, 3);
        barrier(*store, "done", env.rank, env.world_size);
      },
      bounded()));
}

TEST_CASE("fastbox: more messages than a ring holds, posted before any receive, stay in order",
          "[transport][multiproc]") {
  REQUIRE_NOTHROW(cohort::launch(
      2,
      [](const cohort::Environment& env) {
        auto store = open_store(env);
        auto t = connect(*store, env);
        constexpr std::size_t kMessages = 3 * Fastbox::kDepth + 7;
        const auto size_of = [](std::size_t k) {
          return k % 3 == 0 ? std::size_t{8} : k % 3 == 1 ? kInline : kInline + 900;
        };
        const Tag tag = p2p_tag(2, 9);
        if (env.rank == 0) {
          std::vector<std::vector<std::uint8_t>> out;
          std::vector<Request> sends;
          out.reserve(kMessages);
          for (std::size_t k = 0; k < kMessages; ++k) {
            out.push_back(payload(0, 1, size_of(k), static_cast<int>(k)));
            sends.push_back(t->post_send(1, out.back().data(), out.back().size(), tag));
          }
          store->set_string("all posted", "1");  // rank 1 receives only now
          wait_all(*t, sends, "sends beyond the ring");
        } else {
          store->get("all posted", 30s);
          for (std::size_t k = 0; k < kMessages; ++k) {
            std::vector<std::uint8_t> in(size_of(k), 0xEE);
            const Request r = t->post_recv(0, in.data(), in.size(), tag);
            t->wait(std::span<const Request>(&r, 1), after(30s), "receive " + std::to_string(k));
            expect_payload(in, 0, 1, static_cast<int>(k), "message " + std::to_string(k));
          }
        }
        barrier(*store, "done", env.rank, env.world_size);
      },
      bounded()));
}

TEST_CASE("fastbox: spread messages larger than the free slots go in parts and keep their place",
          "[transport][multiproc]") {
  // Three small messages hold three slots, so a 512 KiB message (twice the ring) goes in part
  // and waits in the queue for the rest, and the small message after it waits behind it; the
  // rest mix spread sizes with inline, UCX-sized and rendezvous ones on one tag, so every
  // receive must meet its own message.
  REQUIRE_NOTHROW(cohort::launch(
      2,
      [](const cohort::Environment& env) {
        auto store = open_store(env);
        auto t = connect(*store, env);
        const std::size_t sizes[] = {8,      kInline,          100,         kSpreadLimit,    16,
                                     40000,  kSpreadLimit + 1, 8192,        kEagerLimit + 1, 4,
                                     200000, 200000,           kInline + 1, 100000,          8};
        const Tag tag = p2p_tag(2, 10);
        if (env.rank == 0) {
          std::vector<std::vector<std::uint8_t>> out;
          std::vector<Request> sends;
          for (std::size_t k = 0; k < std::size(sizes); ++k) {
            out.push_back(payload(0, 1, sizes[k], 200 + static_cast<int>(k)));
            sends.push_back(t->post_send(1, out.back().data(), sizes[k], tag));
          }
          for (std::size_t k = 0; k < 3; ++k)
            expect(sends[k].is_completed(), "a small send into a ring with room completes at once");
          expect(!sends[3].is_completed() && !sends[4].is_completed(),
                 "a message larger than the ring, and the one after it, wait for room");
          store->set_string("posted", "1");
          wait_all(*t, sends, "sends");
        } else {
          store->get("posted", 30s);
          for (std::size_t k = 0; k < std::size(sizes); ++k) {
            std::vector<std::uint8_t> in(sizes[k], 0xEE);
            const Request r = t->post_recv(0, in.data(), sizes[k], tag);
            t->wait(std::span<const Request>(&r, 1), after(30s), "receive " + std::to_string(k));
            expect_payload(in, 0, 1, 200 + static_cast<int>(k), "message " + std::to_string(k));
          }
        }
        barrier(*store, "done", env.rank, env.world_size);
      },
      bounded()));
}

TEST_CASE(
    "fastbox: a send too large for the ring, queued behind a full ring, completes when "
    "polled by test()",
    "[transport][multiproc]") {
  // Its turn comes once the ring has room; it then goes to UCX (with COHORT_SINGLE_COPY=off: a
  // UCX rendezvous at this size), which completes only through this rank's worker progress,
  // which test() must still make; or it is announced in the ring and completes with the ack.
  const bool through_ucx = GENERATE(true, false);
  CAPTURE(through_ucx);
  REQUIRE_NOTHROW(cohort::launch(
      2,
      [through_ucx](const cohort::Environment& env) {
        if (through_ucx) {
          setenv("COHORT_SINGLE_COPY", "off", 1);
          cohort::reload_tunables();
        }
        auto store = open_store(env);
        auto t = connect(*store, env);
        constexpr std::size_t kSmall = Fastbox::kDepth + 3;  // three wait for room
        constexpr std::size_t kLarge = kSpreadLimit + 40000;
        const Tag tag = p2p_tag(2, 10);
        if (env.rank == 0) {
          std::vector<std::vector<std::uint8_t>> out;
          std::vector<Request> sends;
          out.reserve(kSmall + 1);
          for (std::size_t k = 0; k <= kSmall; ++k) {
            out.push_back(payload(0, 1, k < kSmall ? 8 : kLarge, static_cast<int>(k)));
            sends.push_back(t->post_send(1, out.back().data(), out.back().size(), tag));
          }
          store->set_string("all posted", "1");  // rank 1 receives only now
          polled_until_done(*t, sends.back(), 20s);
          sends.pop_back();
          wait_all(*t, sends, "the small sends");
        } else {
          store->get("all posted", 30s);
          for (std::size_t k = 0; k <= kSmall; ++k) {
            std::vector<std::uint8_t> in(k < kSmall ? 8 : kLarge, 0xEE);
            const Request r = t->post_recv(0, in.data(), in.size(), tag);
            t->wait(std::span<const Request>(&r, 1), after(30s), "receive " + std::to_string(k));
            expect_payload(in, 0, 1, static_cast<int>(k), "message " + std::to_string(k));
          }
        }
        barrier(*store, "done", env.rank, env.world_size);
      },
      bounded()));
}

TEST_CASE("fastbox: sizes that disagree fail the receive naming the size; the pair still works",
          "[transport][multiproc]") {
  REQUIRE_NOTHROW(cohort::launch(
      2,
      [](const cohort::Environment& env) {
        setenv("UCX_RNDV_THRESH", "65536", 1);  // large messages below are eager: sends finish
        auto store = open_store(env);
        auto t = connect(*store, env);
        // (sent, expected): both through the ring; sent through UCX where the receive takes the
        // ring; sent through the ring where the receive goes to UCX (the message in the ring or
        // taken from it already when the receive is posted: the next test has each for sure).
        const std::pair<std::size_t, std::size_t> cases[] = {
            {16, 8},          {8, 16},        {kInline + 1000, 500}, {kInline + 1, kInline},
            {8, kInline + 1}, {kInline, 8192}};
        for (std::size_t k = 0; k < std::size(cases); ++k) {
          const auto [sent, expected] = cases[k];
          const Tag tag = p2p_tag(3, static_cast<std::uint32_t>(k));
          if (env.rank == 0) {
            const auto data = payload(0, 1, sent, 40);
            const Request s = t->post_send(1, data.data(), sent, tag);
            t->wait(std::span<const Request>(&s, 1), after(30s), "a send the receiver refuses");
            store->set_string("sent/" + std::to_string(k), "1");
          } else {
            store->get("sent/" + std::to_string(k), 30s);  // the message is on its way
            std::vector<std::uint8_t> in(expected);
            const Request r = t->post_recv(0, in.data(), expected, tag);
            expect_sizes_disagree(*t, r, sent, expected);
          }
        }
        const std::size_t sizes[] = {kInline + 4096, 8, kInline};
        pair_still_works(*t, sizes, p2p_tag(3, 99), 50);
        barrier(*store, "done", env.rank, env.world_size);
      },
      bounded()));
}

TEST_CASE("fastbox: a large receive met by a small message fails at once, whichever came first",
          "[transport][multiproc]") {
  // And a small receive met by a small message whose own message was a large one sent before.
  REQUIRE_NOTHROW(cohort::launch(
      2,
      [](const cohort::Environment& env) {
        auto store = open_store(env);
        auto t = connect(*store, env);
        const Tag after_receive = p2p_tag(4, 7), before_receive = p2p_tag(4, 8);
        const Tag other = p2p_tag(4, 9), large_first = p2p_tag(4, 10);
        const auto expect_disagreement = [](const cohort::Error& e, const std::string& tag) {
          // Not a Timeout: the deadline below is far away and nothing else ends the receive.
          expect(e.code() == cohort::ErrorCode::InvalidArgument, e.what());
          expect(e.message().find("sizes disagree") != std::string::npos, e.what());
          expect(e.message().find(std::to_string(kInline + 100) + " bytes, " + tag) !=
                     std::string::npos,
                 e.what());
          expect(e.message().find("got a message of 8 bytes from rank 0") != std::string::npos,
                 e.what());
        };
        std::vector<std::uint8_t> in(kInline + 100);
        if (env.rank == 0) {
          // Found when the message comes: the large receive is posted first.
          store->get("posted", 30s);
          const auto small = payload(0, 1, 8, 60);
          const Request s = t->post_send(1, small.data(), 8, after_receive);
          t->wait(std::span<const Request>(&s, 1), after(30s), "the small send");
          // Found when the receive is posted: the message was taken from the ring before.
          const auto also = payload(0, 1, 8, 61), marker = payload(0, 1, 4, 62);
          const Request more[] = {t->post_send(1, also.data(), 8, before_receive),
                                  t->post_send(1, marker.data(), 4, other)};
          t->wait(more, after(30s), "the small sends");
          // A small receive whose own message is a large one sent before a small one.
          const auto large = payload(0, 1, kInline + 100, 63), late_small = payload(0, 1, 8, 64);
          const Request last[] = {t->post_send(1, large.data(), large.size(), large_first),
                                  t->post_send(1, late_small.data(), 8, large_first)};
          t->wait(last, after(30s), "a large send, then a small one");
          store->set_string("large first", "1");
        } else {
          const Request r = t->post_recv(0, in.data(), in.size(), after_receive);
          store->set_string("posted", "1");
          try {
            t->wait(std::span<const Request>(&r, 1), after(60s), "large receive");
            throw std::runtime_error("a large receive met by a later small message completed");
          } catch (const cohort::Error& e) {
            expect_disagreement(e, "tag 7");
          }
          // Receiving the marker, sent after it, takes tag 8's message from the ring too.
          std::vector<std::uint8_t> marker(4);
          const Request m = t->post_recv(0, marker.data(), 4, other);
          t->wait(std::span<const Request>(&m, 1), after(30s), "the marker");
          expect_payload(marker, 0, 1, 62, "marker");
          const Request late = t->post_recv(0, in.data(), in.size(), before_receive);
          try {
            t->wait(std::span<const Request>(&late, 1), after(60s), "large receive");
            throw std::runtime_error("a large receive met by an earlier small message completed");
          } catch (const cohort::Error& e) {
            expect_disagreement(e, "tag 8");
          }
          store->get("large first", 30s);
          std::vector<std::uint8_t> small(8);
          const Request swapped[] = {t->post_recv(0, small.data(), 8, large_first),
                                     t->post_recv(0, in.data(), in.size(), large_first)};
          try {
            t->wait(std::span<const Request>(swapped, 1), after(60s), "small receive");
            throw std::runtime_error("a small receive met by an earlier large message completed");
          } catch (const cohort::Error& e) {
            expect(e.code() == cohort::ErrorCode::InvalidArgument, e.what());
            expect(e.message().find("sizes disagree: receive from rank 0 (8 bytes, tag 10)") !=
                       std::string::npos,
                   e.what());
          }
          t->cancel_all();
        }
        barrier(*store, "done", env.rank, env.world_size);
      },
      bounded()));
}

TEST_CASE("fastbox: large and small messages on one tag meet receives posted before they come",
          "[transport][multiproc]") {
  // Every receive is posted before any message comes, so each small message meets large
  // receives still waiting in UCX: those before it in order must not take it.
  REQUIRE_NOTHROW(cohort::launch(
      2,
      [](const cohort::Environment& env) {
        auto store = open_store(env);
        auto t = connect(*store, env);
        const Tag tag = p2p_tag(6, 3);
        const std::size_t sizes[] = {
            kInline + 1, 8,       kSpreadLimit + 40000, 0,     kInline + 500,
            4,           kInline, kEagerLimit,          40000, 8192};
        if (env.rank == 0) {
          store->get("posted", 30s);
          std::vector<std::vector<std::uint8_t>> out;
          std::vector<Request> sends;
          for (std::size_t k = 0; k < std::size(sizes); ++k) {
            out.push_back(payload(0, 1, sizes[k], 70 + static_cast<int>(k)));
            sends.push_back(t->post_send(1, out.back().data(), sizes[k], tag));
          }
          wait_all(*t, sends, "sends");
        } else {
          std::vector<std::vector<std::uint8_t>> in;
          std::vector<Request> recvs;
          for (const std::size_t size : sizes) {
            in.emplace_back(size, 0xEE);
            recvs.push_back(t->post_recv(0, in.back().data(), size, tag));
          }
          store->set_string("posted", "1");
          wait_all(*t, recvs, "receives");
          for (std::size_t k = 0; k < std::size(sizes); ++k)
            expect_payload(in[k], 0, 1, 70 + static_cast<int>(k), "message " + std::to_string(k));
        }
        barrier(*store, "done", env.rank, env.world_size);
      },
      bounded()));
}

TEST_CASE("fastbox: a communicator's message counts go with its tag id, and only with it",
          "[transport][multiproc]") {
  // A receive too large for the ring is counted; one that never got its message (cancelled)
  // would, if its count outlived its communicator, make a later communicator with the same tag
  // id take a large receive for the partner of a small message sent after a large one. A view
  // sharing its communicator's id (as host groups' are) must not take the counts with it.
  REQUIRE_NOTHROW(cohort::launch(
      2,
      [](const cohort::Environment& env) {
        auto store = open_store(env);
        auto t = connect(*store, env);
        constexpr std::uint32_t kReusedId = 9;
        const Tag tag = p2p_tag(kReusedId, 1);
        const int members[] = {0, 1};
        {
          auto first = t->derive(members, env.rank, TagIdClaim(t->tag_ids(), kReusedId));
          if (env.rank == 1) {
            std::vector<std::uint8_t> never(kInline + 1);
            first->post_recv(0, never.data(), never.size(), tag);
            first->cancel_all();
          }
        }
        // Both ranks dropped it before either uses the id again (as TagIdPool ensures).
        barrier(*store, "first gone", env.rank, env.world_size);
        auto second = t->derive(members, env.rank, TagIdClaim(t->tag_ids(), kReusedId));
        const std::size_t large = kInline + 1, small = 8;
        if (env.rank == 0) {
          const auto big = payload(0, 1, large, 80), little = payload(0, 1, small, 81);
          const Request sends[] = {second->post_send(1, big.data(), large, tag),
                                   second->post_send(1, little.data(), small, tag)};
          store->set_string("sent", "1");
          second->wait(sends, after(30s), "sends");
        } else {
          store->get("sent", 30s);  // the small message is in the ring before the receives
          std::vector<std::uint8_t> big(large, 0xEE), little(small, 0xEE);
          const Request recvs[] = {second->post_recv(0, big.data(), large, tag),
                                   second->post_recv(0, little.data(), small, tag)};
          second->wait(recvs, after(30s), "receives");
          expect_payload(big, 0, 1, 80, "large message");
          expect_payload(little, 0, 1, 81, "small message");
        }
        // On the world (id 0): a large message, a view of the world's id dropped, a small one.
        const Tag world_tag = p2p_tag(0, 2);
        if (env.rank == 0) {
          const auto big = payload(0, 1, large, 82), little = payload(0, 1, small, 83);
          const Request first = t->post_send(1, big.data(), large, world_tag);
          t->derive(members, env.rank, TagIdClaim()).reset();
          const Request then = t->post_send(1, little.data(), small, world_tag);
          store->set_string("world sent", "1");
          const Request sends[] = {first, then};
          t->wait(sends, after(30s), "world sends");
        } else {
          store->get("world sent", 30s);
          std::vector<std::uint8_t> big(large, 0xEE), little(small, 0xEE);
          const Request recvs[] = {t->post_recv(0, big.data(), large, world_tag),
                                   t->post_recv(0, little.data(), small, world_tag)};
          t->wait(recvs, after(30s), "world receives");
          expect_payload(big, 0, 1, 82, "large world message");
          expect_payload(little, 0, 1, 83, "small world message");
        }
        barrier(*store, "done", env.rank, env.world_size);
      },
      bounded()));
}

TEST_CASE("fastbox: a receive from a peer that dies fails naming it", "[transport][multiproc]") {
  const bool polled = GENERATE(false, true);  // waited on, or polled by test()
  CAPTURE(polled);
  REQUIRE_NOTHROW(cohort::launch(
      2,
      [polled](const cohort::Environment& env) {
        if (env.rank == 1) {
          // Rank 1 joins from a child that dies (see run_in_child_that_dies).
          cohort::test::run_in_child_that_dies([&] {
            auto store = open_store(env);
            auto t = connect(*store, env);
            store->get("posted", 30s);
          });
          return;
        }
        auto store = open_store(env);
        auto t = connect(*store, env);
        std::uint64_t value = 0;
        const Request r = t->post_recv(1, &value, sizeof value, p2p_tag(4, 1));
        store->set_string("posted", "1");
        expect_dead_peer_named(*t, r, polled, "a receive from a dead peer");
        t->cancel_all();
        t.reset();
      },
      bounded()));
}

TEST_CASE("fastbox: a receive polled by test() finds its ring message, and a size disagreement",
          "[transport][multiproc]") {
  REQUIRE_NOTHROW(cohort::launch(
      2,
      [](const cohort::Environment& env) {
        setenv("UCX_RNDV_THRESH", "65536", 1);  // the large message below is eager: it is sent
        auto store = open_store(env);
        auto t = connect(*store, env);
        const Tag ring = p2p_tag(5, 1), too_large = p2p_tag(5, 2);
        if (env.rank == 0) {
          store->get("polling", 30s);  // the receive below is posted and being polled
          const auto small = payload(0, 1, 8, 60);
          const Request s = t->post_send(1, small.data(), small.size(), ring);
          t->wait(std::span<const Request>(&s, 1), after(30s), "the ring message");
          const auto large = payload(0, 1, kInline + 100, 61);
          const Request l = t->post_send(1, large.data(), large.size(), too_large);
          t->wait(std::span<const Request>(&l, 1), after(30s), "the large message");
          store->set_string("sent", "1");
        } else {
          std::vector<std::uint8_t> in(8, 0xEE);
          const Request r = t->post_recv(0, in.data(), in.size(), ring);
          expect(!t->test(r), "a receive nobody sent to yet completed");
          store->set_string("polling", "1");
          polled_until_done(*t, r, 20s);
          expect_payload(in, 0, 1, 60, "ring message polled by test()");
          store->get("sent", 30s);
          // 8 bytes expected where kInline + 100 came through UCX: only UCX's probe tells.
          const Request d = t->post_recv(0, in.data(), in.size(), too_large);
          try {
            polled_until_done(*t, d, 20s);
            throw std::runtime_error("a receive met by a larger message completed");
          } catch (const cohort::Error& e) {
            expect(e.code() == cohort::ErrorCode::InvalidArgument, e.what());
            expect(e.message().find("sizes disagree") != std::string::npos, e.what());
            expect(e.message().find("message of " + std::to_string(kInline + 100) + " bytes") !=
                       std::string::npos,
                   e.what());
          }
        }
        barrier(*store, "done", env.rank, env.world_size);
      },
      bounded()));
}

TEST_CASE("fastbox: of two receives polled in turn by test(), each finds its own disagreement",
          "[transport][multiproc]") {
  // The every-few-tests look at UCX is counted per receive: counted for the hub, with two
  // receives polled in turn it fell on the same one every time.
  REQUIRE_NOTHROW(cohort::launch(
      2,
      [](const cohort::Environment& env) {
        setenv("UCX_RNDV_THRESH", "65536", 1);  // the large messages below are eager: sent
        auto store = open_store(env);
        auto t = connect(*store, env);
        const Tag first = p2p_tag(5, 4), second = p2p_tag(5, 5);
        if (env.rank == 0) {
          for (const Tag tag : {first, second}) {
            store->get(tag == first ? "polling first" : "polling second", 30s);
            const auto large = payload(0, 1, kInline + 100, 62);
            const Request s = t->post_send(1, large.data(), large.size(), tag);
            t->wait(std::span<const Request>(&s, 1), after(30s), "a large message");
          }
        } else {
          std::uint64_t a = 0, b = 0;
          const Request ra = t->post_recv(0, &a, sizeof a, first);
          const Request rb = t->post_recv(0, &b, sizeof b, second);
          // The first receive's message comes first; both are polled in turn until one fails,
          // which must be the first. Then the second's message comes, and it is polled alone.
          store->set_string("polling first", "1");
          const auto until = std::chrono::steady_clock::now() + 20s;
          bool failed = false;
          while (!failed && std::chrono::steady_clock::now() < until) {
            for (const Request* r : {&ra, &rb}) {
              try {
                expect(!t->test(*r), "a receive met by a larger message completed");
              } catch (const cohort::Error& e) {
                expect(r == &ra, std::string("the second receive failed first: ") + e.what());
                expect(e.message().find("sizes disagree") != std::string::npos, e.what());
                failed = true;
                break;
              }
            }
          }
          expect(failed, "test() reported nothing within the bound");
          store->set_string("polling second", "1");
          try {
            polled_until_done(*t, rb, 20s);
            throw std::runtime_error("a receive met by a larger message completed");
          } catch (const cohort::Error& e) {
            expect(e.message().find("sizes disagree") != std::string::npos, e.what());
          }
        }
        barrier(*store, "done", env.rank, env.world_size);
      },
      bounded()));
}

TEST_CASE("fastbox: a rendezvous send stays pending until its receiver copied the message",
          "[transport][multiproc]") {
  // UCX would send this size eagerly (UCX_RNDV_THRESH below) and complete the send without the
  // receiver: only the ring's rendezvous keeps it pending.
  if (!rendezvous_runs_here()) return;
  REQUIRE_NOTHROW(cohort::launch(
      2,
      [](const cohort::Environment& env) {
        setenv("UCX_RNDV_THRESH", "inf", 1);
        auto store = open_store(env);
        auto t = connect(*store, env);
        constexpr std::size_t kBytes = kSpreadLimit + 64 * 1024;
        const Tag tag = p2p_tag(8, 1);
        if (env.rank == 0) {
          const auto data = payload(0, 1, kBytes, 80);
          const Request s = t->post_send(1, data.data(), kBytes, tag);
          // Rank 1 posts its receive only once these polls are over.
          for (int poll = 0; poll < 1000; ++poll)
            expect(!t->test(s), "a rendezvous send completed before its receive was posted");
          store->set_string("polled", "1");
          polled_until_done(*t, s, 20s);
        } else {
          store->get("polled", 30s);
          std::vector<std::uint8_t> in(kBytes, 0xEE);
          const Request r = t->post_recv(0, in.data(), kBytes, tag);
          t->wait(std::span<const Request>(&r, 1), after(30s), "the rendezvous receive");
          expect_payload(in, 0, 1, 80, "rendezvous message");
        }
        barrier(*store, "done", env.rank, env.world_size);
      },
      bounded()));
}

TEST_CASE(
    "fastbox: a rendezvous that disagrees on size fails the receive, completes the send, and "
    "leaves the pair working",
    "[transport][multiproc]") {
  if (!rendezvous_runs_here()) return;
  // The receive posted first; the message first (in the ring, or taken from it already); the
  // message surely taken from the ring first (a marker sent after it is received before).
  const int order = GENERATE(0, 1, 2);
  const bool receive_first = order == 0, marker = order == 2;
  CAPTURE(order);
  REQUIRE_NOTHROW(cohort::launch(
      2,
      [receive_first, marker](const cohort::Environment& env) {
        auto store = open_store(env);
        auto t = connect(*store, env);
        // (sent, expected) across the four ways a message goes: rendezvous against UCX's
        // middle sizes, against another rendezvous size, against a spread one and against the
        // ring's inline sizes; a spread message against UCX's sizes and another spread size.
        constexpr std::size_t kSmallRendezvous = kSpreadLimit + 64 * 1024,
                              kLargeRendezvous = kSpreadLimit + 128 * 1024, kSpread = 100000;
        const std::pair<std::size_t, std::size_t> cases[] = {{kSmallRendezvous, 16 * 1024},
                                                             {16 * 1024, kSmallRendezvous},
                                                             {kSpread, kSmallRendezvous},
                                                             {kSmallRendezvous, kSpread},
                                                             {kSpread, 16 * 1024},
                                                             {16 * 1024, kSpread},
                                                             {kSpread, kSpread + 8},
                                                             {kSmallRendezvous, kLargeRendezvous},
                                                             {kLargeRendezvous, kSmallRendezvous},
                                                             {8, kSmallRendezvous},
                                                             {kSmallRendezvous, 8}};
        for (std::size_t k = 0; k < std::size(cases); ++k) {
          const auto [sent, expected] = cases[k];
          const Tag tag = p2p_tag(9, static_cast<std::uint32_t>(k));
          const std::string key = std::to_string(k);
          if (env.rank == 0) {
            const auto data = payload(0, 1, sent, 90);
            if (receive_first) store->get("posted/" + key, 30s);
            const std::uint32_t mark = 0xC0FFEE;
            const Request sends[] = {t->post_send(1, data.data(), sent, tag),
                                     marker ? t->post_send(1, &mark, sizeof mark, p2p_tag(9, 50))
                                            : Request::completed()};
            store->set_string("sent/" + key, "1");
            // Completes: the receiver acks a rendezvous it refuses.
            t->wait(sends, after(20s), "a send the receiver refuses");
          } else {
            if (!receive_first) store->get("sent/" + key, 30s);  // the message is on its way
            if (marker) {
              std::uint32_t mark = 0;
              const Request m = t->post_recv(0, &mark, sizeof mark, p2p_tag(9, 50));
              t->wait(std::span<const Request>(&m, 1), after(20s), "the marker");
              expect(mark == 0xC0FFEE, "the marker's value");
            }
            std::vector<std::uint8_t> in(expected);
            const Request r = t->post_recv(0, in.data(), expected, tag);
            if (receive_first) store->set_string("posted/" + key, "1");
            expect_sizes_disagree(*t, r, sent, expected);
          }
        }
        // Each way a message can go, both ways.
        const std::size_t sizes[] = {kSmallRendezvous, 16 * 1024, 8, kLargeRendezvous, kSpread};
        pair_still_works(*t, sizes, p2p_tag(9, 99), 95);
        barrier(*store, "done", env.rank, env.world_size);
      },
      bounded()));
}

TEST_CASE("fastbox: a rendezvous send to a peer that dies fails naming it",
          "[transport][multiproc]") {
  const bool polled = GENERATE(false, true);  // waited on, or polled by test()
  CAPTURE(polled);
  REQUIRE_NOTHROW(cohort::launch(
      2,
      [polled](const cohort::Environment& env) {
        if (env.rank == 1) {
          cohort::test::run_in_child_that_dies([&] {
            auto store = open_store(env);
            auto t = connect(*store, env);
            store->get("posted", 30s);
            raise(SIGKILL);  // dies without receiving, its transport still up
          });
          return;
        }
        auto store = open_store(env);
        auto t = connect(*store, env);
        const auto data = payload(0, 1, kSpreadLimit + 40000, 100);
        const Request s = t->post_send(1, data.data(), data.size(), p2p_tag(10, 1));
        store->set_string("posted", "1");
        expect_dead_peer_named(*t, s, polled, "a rendezvous send to a dead peer");
        t->cancel_all();
        t.reset();
      },
      bounded()));
}

TEST_CASE("fastbox: a rendezvous message whose sender died fails its receive, not fills it",
          "[transport][multiproc]") {
  REQUIRE_NOTHROW(cohort::launch(
      2,
      [](const cohort::Environment& env) {
        constexpr std::size_t kBytes = kSpreadLimit + 40000;
        const Tag tag = p2p_tag(10, 2);
        if (env.rank == 1) {
          cohort::test::run_in_child_that_dies([&] {
            auto store = open_store(env);
            auto t = connect(*store, env);
            const auto data = payload(1, 0, kBytes, 101);
            (void)t->post_send(0, data.data(), kBytes, tag);  // announced, never taken
            store->set_string("sent", "1");
          });
          // The child is reaped: its memory is gone before rank 0 receives.
          open_store(env)->set_string("dead", "1");
          return;
        }
        auto store = open_store(env);
        auto t = connect(*store, env);
        store->get("dead", 30s);
        std::vector<std::uint8_t> in(kBytes, 0xEE);
        const Request r = t->post_recv(1, in.data(), kBytes, tag);
        expect_dead_peer_named(*t, r, false, "a receive from a dead sender's memory");
        t->cancel_all();
        t.reset();
      },
      bounded()));
}

TEST_CASE("fastbox: a rendezvous receive whose ack finds the ring back full",
          "[transport][multiproc]") {
  // Rank 1 fills its ring to rank 0 with small sends rank 0 does not take yet, then receives
  // rank 0's rendezvous message: the copy is made (or the message refused for its size, by a
  // receive of another rendezvous size or of UCX's middle sizes), and the ack finds no room.
  // - By UCX (the usual way): the receive ends, and rank 0's send completes while rank 1 makes
  //   no more calls; an ack waiting for room would keep both waiting.
  // - When UCX will not take it at once either (the test makes it refuse): the ack waits for
  //   room, and so does the receive, or rank 0's send would wait for a receiver that may never
  //   call again.
  if (!rendezvous_runs_here()) return;
  enum class Receive { Copies, RefusesRendezvousSize, RefusesUcxSize };
  const Receive mode =
      GENERATE(Receive::Copies, Receive::RefusesRendezvousSize, Receive::RefusesUcxSize);
  const bool by_ring = GENERATE(false, true);
  const bool refuse = mode != Receive::Copies;
  CAPTURE(static_cast<int>(mode), by_ring);
  REQUIRE_NOTHROW(cohort::launch(
      2,
      [mode, refuse, by_ring](const cohort::Environment& env) {
        cohort::transport::ucx::testing::refuse_immediate_messages(by_ring);
        auto store = open_store(env);
        auto t = connect(*store, env);
        constexpr std::size_t kBytes = kSpreadLimit + 64 * 1024;
        const Tag large = p2p_tag(11, 1), small = p2p_tag(11, 2);
        if (env.rank == 0) {
          const auto data = payload(0, 1, kBytes, 110);
          const Request s = t->post_send(1, data.data(), kBytes, large);
          store->set_string("announced", "1");
          // No progress here until rank 1's receive ended (by UCX), or polled (by the ring).
          store->get("received", 30s);
          polled_until_done(*t, s, 20s);
          store->set_string("sent", "1");
          for (std::uint64_t k = 0; k < Fastbox::kDepth; ++k) {
            std::uint64_t value = 0;
            const Request r = t->post_recv(1, &value, sizeof value, small);
            t->wait(std::span<const Request>(&r, 1), after(20s), "a small message");
            expect(value == k, "small message " + std::to_string(k));
          }
        } else {
          store->get("announced", 30s);
          std::vector<std::uint64_t> values(Fastbox::kDepth);
          for (std::uint64_t k = 0; k < Fastbox::kDepth; ++k) {
            values[k] = k;
            const Request s = t->post_send(0, &values[k], sizeof values[k], small);
            expect(s.is_completed(), "a small send into a ring with room completes at once");
          }
          const std::size_t expected = mode == Receive::Copies                  ? kBytes
                                       : mode == Receive::RefusesRendezvousSize ? 2 * kBytes
                                                                                : 16 * 1024;
          std::vector<std::uint8_t> in(expected, 0xEE);
          const Request r = t->post_recv(0, in.data(), expected, large);
          const auto finish = [&] {
            if (refuse) {
              expect_sizes_disagree(*t, r, kBytes, expected);
            } else {
              polled_until_done(*t, r, 20s);
              expect_payload(in, 0, 1, 110, "the rendezvous message");
            }
          };
          if (by_ring) {
            for (int poll = 0; poll < 1000; ++poll)
              expect(!t->test(r), "the receive ended while its ack could not be written");
            if (!refuse) expect_payload(in, 0, 1, 110, "copied before the ack");
            store->set_string("received", "1");
            finish();
          } else {
            finish();
            store->set_string("received", "1");
            store->get("sent", 30s);  // no calls here until rank 0's send completed
          }
        }
        barrier(*store, "done", env.rank, env.world_size);
      },
      bounded()));
}

TEST_CASE("fastbox: an ack for a message received while a spread message is half in its ring",
          "[transport][multiproc]") {
  // Rank 0 acks rank 1's rendezvous message while its own 512 KiB message to rank 1, twice the
  // ring, is half in the ring the ack would take (rank 1 has taken none of it). The ack may not
  // land between two pieces:
  // - by UCX (the usual way) it goes around them, so rank 1's send completes while rank 0 makes
  //   no more calls and the rest of the spread message stays out;
  // - when UCX will not take it at once (the test makes it refuse) it waits for the last piece,
  //   and the receive with it.
  // Then rank 1 takes the spread message and the one queued behind it whole, and both ways at
  // once, a few rounds.
  if (!rendezvous_runs_here()) return;
  const bool by_ring = GENERATE(false, true);
  CAPTURE(by_ring);
  REQUIRE_NOTHROW(cohort::launch(
      2,
      [by_ring](const cohort::Environment& env) {
        cohort::transport::ucx::testing::refuse_immediate_messages(by_ring);
        auto store = open_store(env);
        auto t = connect(*store, env);
        constexpr std::size_t kRendezvous = 2 * kSpreadLimit;
        const Tag tag = p2p_tag(0, 19), behind_tag = p2p_tag(0, 20);
        if (env.rank == 0) {
          store->get("announced", 30s);
          const auto data = payload(0, 1, kSpreadLimit, 191);
          const std::uint64_t small = 1919;
          const Request s = t->post_send(1, data.data(), kSpreadLimit, tag);
          const Request behind = t->post_send(1, &small, sizeof small, behind_tag);
          expect(!s.is_completed() && !behind.is_completed(),
                 "a spread message twice the ring's size, and one behind it, went at once");
          std::vector<std::uint8_t> in(kRendezvous, 0xEE);
          const Request r = t->post_recv(1, in.data(), kRendezvous, tag);
          if (by_ring) {
            for (int poll = 0; poll < 1000; ++poll)
              expect(!t->test(r), "the receive ended while its ack could not be written");
          } else {
            polled_until_done(*t, r, 20s);
          }
          expect_payload(in, 1, 0, 192, "the rendezvous message");
          store->set_string("copied", "1");
          std::vector<Request> all = {s, behind};
          if (by_ring) {
            all.push_back(r);  // ends with its ack
          } else {
            store->get("acked", 30s);  // no progress here until rank 1's send completed
          }
          wait_all(*t, all, "the spread send, the one behind it (and the acked receive)");
        } else {
          const auto data = payload(1, 0, kRendezvous, 192);
          const Request s = t->post_send(0, data.data(), kRendezvous, tag);
          store->set_string("announced", "1");
          store->get("copied", 30s);
          if (!by_ring) {
            polled_until_done(*t, s, 20s);
            store->set_string("acked", "1");
          }
          std::vector<std::uint8_t> in(kSpreadLimit, 0xEE);
          std::uint64_t small = 0;
          std::vector<Request> all = {t->post_recv(0, in.data(), kSpreadLimit, tag),
                                      t->post_recv(0, &small, sizeof small, behind_tag)};
          if (by_ring) all.push_back(s);  // its ack comes after the spread message's last piece
          wait_all(*t, all, "the spread receive, the one behind it (and the rendezvous send)");
          expect_payload(in, 0, 1, 191, "the spread message");
          expect(small == 1919, "the message behind the spread one");
        }
        const std::size_t out_bytes = env.rank == 0 ? kSpreadLimit : kRendezvous;
        const std::size_t in_bytes = env.rank == 0 ? kRendezvous : kSpreadLimit;
        const int peer = 1 - env.rank;
        for (int round = 0; round < 10; ++round) {
          const auto data = payload(env.rank, peer, out_bytes, 193 + round);
          std::vector<std::uint8_t> in(in_bytes, 0xEE);
          const std::vector<Request> both = {t->post_recv(peer, in.data(), in_bytes, tag),
                                             t->post_send(peer, data.data(), out_bytes, tag)};
          wait_all(*t, both, "round " + std::to_string(round));
          expect_payload(in, peer, env.rank, 193 + round, "round " + std::to_string(round));
        }
        barrier(*store, "done", env.rank, env.world_size);
      },
      bounded()));
}

TEST_CASE("fastbox: a spread send cancelled after its first part fails its receive",
          "[transport][multiproc]") {
  // Rank 0's communicator (a view) is cancelled while its 512 KiB message is half in rank 1's
  // ring (the ring holds about 256 KiB), with a small message queued behind it: the sender
  // withdraws the message at once (an active message naming where its pieces end), and the
  // receive fails naming the cancelled send, whether it was posted before rank 1 took the first
  // part or after (the part then waits as an unexpected message), and also while rank 0 makes
  // no call after the cancel (a Withdrawal piece, waiting for room, would never go then). The
  // pair then goes on working, every way a message goes.
  // Also the ring's own way, when UCX will not take the withdrawal at once (the test makes it
  // refuse): a Withdrawal piece once rank 1 makes room (not with a silent sender).
  enum class Mode { ReceivePostedFirst, PartTakenFirst, SenderSilent };
  const Mode mode = GENERATE(Mode::ReceivePostedFirst, Mode::PartTakenFirst, Mode::SenderSilent);
  const bool by_piece = GENERATE(false, true);
  if (by_piece && mode == Mode::SenderSilent) return;
  const bool taken_before_posted = mode == Mode::PartTakenFirst;
  CAPTURE(static_cast<int>(mode), by_piece);
  REQUIRE_NOTHROW(cohort::launch(
      2,
      [mode, by_piece, taken_before_posted](const cohort::Environment& env) {
        cohort::transport::ucx::testing::refuse_immediate_messages(by_piece);
        auto store = open_store(env);
        auto t = connect(*store, env);
        constexpr std::uint32_t kViewId = 17;
        const Tag tag = p2p_tag(kViewId, 1), word = p2p_tag(0, 17);
        const int members[] = {0, 1};
        auto view = t->derive(members, env.rank, TagIdClaim(t->tag_ids(), kViewId));
        std::uint8_t mark = 0;
        if (env.rank == 0) {
          const auto data = payload(0, 1, kSpreadLimit, 170);
          const std::uint64_t small = 99;
          const Request s = view->post_send(1, data.data(), kSpreadLimit, tag);
          const Request behind = view->post_send(1, &small, sizeof small, tag);
          expect(!s.is_completed() && !behind.is_completed(),
                 "a spread message twice the ring's size, and one behind it, went at once");
          view->cancel_all();
          store->set_string("cancelled", "1");
          // No call here until rank 1's receive failed.
          if (mode == Mode::SenderSilent) store->get("failed", 30s);
          // Through the ring too, after the withdrawn message.
          const Request said = t->post_send(1, &mark, 1, word);
          const Request r = t->post_recv(1, &mark, 1, word);
          const std::vector<Request> both = {said, r};
          wait_all(*t, both, "the words with rank 1");
        } else {
          store->get("cancelled", 30s);
          // Taking rank 0's word takes the first part, and its end, from the ring first.
          if (taken_before_posted) {
            const Request r = t->post_recv(0, &mark, 1, word);
            t->wait(std::span<const Request>(&r, 1), after(30s), "rank 0's word");
          }
          std::vector<std::uint8_t> in(kSpreadLimit, 0xEE);
          const Request r = view->post_recv(0, in.data(), kSpreadLimit, tag);
          try {
            view->wait(std::span<const Request>(&r, 1), after(20s), "the cancelled send's receive");
            throw std::runtime_error("a receive of a withdrawn spread message completed");
          } catch (const cohort::Error& e) {
            expect(e.code() == cohort::ErrorCode::RemoteError, std::string("code: ") + e.what());
            expect(e.message().find("cancelled") != std::string::npos, e.what());
            expect(e.message().find("rank 0") != std::string::npos, e.what());
          }
          store->set_string("failed", "1");
          if (!taken_before_posted) {
            const Request w = t->post_recv(0, &mark, 1, word);
            t->wait(std::span<const Request>(&w, 1), after(30s), "rank 0's word");
          }
          const Request s = t->post_send(0, &mark, 1, word);
          t->wait(std::span<const Request>(&s, 1), after(30s), "the word to rank 0");
        }
        view.reset();
        barrier(*store, "view gone", env.rank, env.world_size);
        const std::size_t sizes[] = {kSpreadLimit,     8,         100000,
                                     kSpreadLimit + 1, 16 * 1024, kSpreadLimit};
        pair_still_works(*t, sizes, p2p_tag(0, 18), 171);
        barrier(*store, "done", env.rank, env.world_size);
      },
      bounded()));
}

TEST_CASE("fastbox: a withdrawal told by active message outlives the Withdrawal piece before it",
          "[transport][multiproc]") {
  // Two spread messages withdrawn in a row, the first by a Withdrawal piece (UCX made to refuse
  // the active message), the second by active message, which rank 1 learns before it takes the
  // first one's Withdrawal piece. Taking that piece must not forget where the second ends, or
  // the second's receive waits out its deadline. Rank 1 takes rank 0's first part before rank 0
  // writes the rest (store keys order the steps).
  REQUIRE_NOTHROW(cohort::launch(
      2,
      [](const cohort::Environment& env) {
        auto store = open_store(env);
        auto t = connect(*store, env);
        const int members[] = {0, 1};
        auto first = t->derive(members, env.rank, TagIdClaim(t->tag_ids(), 21));
        auto second = t->derive(members, env.rank, TagIdClaim(t->tag_ids(), 22));
        const Tag tag1 = p2p_tag(21, 1), tag2 = p2p_tag(22, 1), word = p2p_tag(0, 23);
        std::uint8_t mark = 0;
        if (env.rank == 0) {
          const auto data = payload(0, 1, kSpreadLimit, 210);
          cohort::transport::ucx::testing::refuse_immediate_messages(true);
          const Request s1 = first->post_send(1, data.data(), kSpreadLimit, tag1);
          expect(!s1.is_completed(), "the first spread message went whole");
          first->cancel_all();  // a Withdrawal piece, queued: the ring is full
          store->set_string("first cancelled", "1");
          store->get("first part taken", 30s);
          // Room now: the Withdrawal piece goes, then the second message's first part.
          const Request s2 = second->post_send(1, data.data(), kSpreadLimit, tag2);
          for (int poll = 0; poll < 100 && !second->test(s2); ++poll) {
          }
          expect(!s2.is_completed(), "the second spread message went whole");
          cohort::transport::ucx::testing::refuse_immediate_messages(false);
          second->cancel_all();  // by active message
          store->set_string("second cancelled", "1");
          // The pair goes on: a word each way.
          const Request said = t->post_send(1, &mark, 1, word);
          const Request r = t->post_recv(1, &mark, 1, word);
          const std::vector<Request> both = {said, r};
          wait_all(*t, both, "the words with rank 1");
        } else {
          store->get("first cancelled", 30s);
          // Takes the first part (unexpected: nothing posted for it) while polling for a word
          // that comes only later.
          const Request w = t->post_recv(0, &mark, 1, word);
          for (int poll = 0; poll < 100; ++poll) t->test(w);
          store->set_string("first part taken", "1");
          store->get("second cancelled", 30s);
          for (auto* view : {first.get(), second.get()}) {
            std::vector<std::uint8_t> in(kSpreadLimit, 0xEE);
            const Request r =
                view->post_recv(0, in.data(), kSpreadLimit, view == first.get() ? tag1 : tag2);
            try {
              view->wait(std::span<const Request>(&r, 1), after(20s),
                         "a withdrawn message's receive");
              throw std::runtime_error("a receive of a withdrawn spread message completed");
            } catch (const cohort::Error& e) {
              expect(e.code() == cohort::ErrorCode::RemoteError, std::string("code: ") + e.what());
              expect(e.message().find("cancelled") != std::string::npos, e.what());
            }
          }
          t->wait(std::span<const Request>(&w, 1), after(30s), "rank 0's word");
          const Request s = t->post_send(0, &mark, 1, word);
          t->wait(std::span<const Request>(&s, 1), after(30s), "the word to rank 0");
        }
        first.reset();
        second.reset();
        barrier(*store, "done", env.rank, env.world_size);
      },
      bounded()));
}

TEST_CASE("fastbox: a rendezvous send cancelled before its receive fails that receive",
          "[transport][multiproc]") {
  // Rank 0's communicator (a view) is cancelled while its large send's announcement waits in
  // rank 1's ring; rank 0 then writes other bytes into the buffer, which is the user's again. A
  // receive posted after must fail naming the cancelled send, not deliver those bytes.
  if (!rendezvous_runs_here()) return;
  REQUIRE_NOTHROW(cohort::launch(
      2,
      [](const cohort::Environment& env) {
        auto store = open_store(env);
        auto t = connect(*store, env);
        constexpr std::size_t kBytes = kSpreadLimit + 64 * 1024;
        constexpr std::uint32_t kViewId = 12;
        const Tag tag = p2p_tag(kViewId, 1);
        const int members[] = {0, 1};
        auto view = t->derive(members, env.rank, TagIdClaim(t->tag_ids(), kViewId));
        if (env.rank == 0) {
          auto data = payload(0, 1, kBytes, 120);
          const Request s = view->post_send(1, data.data(), kBytes, tag);
          expect(!view->test(s), "a rendezvous send completed before its receive was posted");
          view->cancel_all();
          // The buffer is the caller's again: it writes other bytes there.
          const auto other = payload(0, 1, kBytes, 121);
          std::copy(other.begin(), other.end(), data.begin());
          store->set_string("cancelled", "1");
        } else {
          store->get("cancelled", 30s);
          std::vector<std::uint8_t> in(kBytes, 0xEE);
          const Request r = view->post_recv(0, in.data(), kBytes, tag);
          try {
            view->wait(std::span<const Request>(&r, 1), after(20s), "the cancelled send's receive");
            throw std::runtime_error(
                "a receive of a cancelled rendezvous send completed (byte 0 is " +
                std::to_string(in[0]) + ")");
          } catch (const cohort::Error& e) {
            expect(e.code() == cohort::ErrorCode::RemoteError, std::string("code: ") + e.what());
            expect(e.message().find("cancelled") != std::string::npos, e.what());
            expect(e.message().find("rank 0") != std::string::npos, e.what());
          }
        }
        view.reset();
        barrier(*store, "view gone", env.rank, env.world_size);
        // The pair goes on working, by rendezvous and otherwise.
        const std::size_t sizes[] = {kBytes, 8, kBytes, 16 * 1024};
        pair_still_works(*t, sizes, p2p_tag(0, 12), 122);
        barrier(*store, "done", env.rank, env.world_size);
      },
      bounded()));
}

namespace {

/// A userfaultfd that also catches the kernel's own accesses (another process's
/// process_vm_readv of the registered pages), or -1 where this process may not make one.
int kernel_userfaultfd() {
  const int fd = static_cast<int>(syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK));
  if (fd < 0) return -1;
  uffdio_api api{};
  api.api = UFFD_API;
  if (ioctl(fd, UFFDIO_API, &api) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

/// Whether a child's process_vm_readv of this process's pages registered missing with a
/// userfaultfd waits for them (rather than failing at once, as a kernel that does not hand
/// remote faults to userfaultfd would do).
bool remote_reads_wait_for_missing_pages(int uffd) {
  constexpr std::size_t kPage = 4096;
  void* page = mmap(nullptr, kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (page == MAP_FAILED) return false;
  uffdio_register reg{};
  reg.range = {reinterpret_cast<std::uintptr_t>(page), kPage};
  reg.mode = UFFDIO_REGISTER_MODE_MISSING;
  bool waits = false;
  if (ioctl(uffd, UFFDIO_REGISTER, &reg) == 0) {
    const pid_t parent = getpid();
    const pid_t child = fork();
    if (child == 0) {
      std::uint8_t into[kPage];
      iovec local{into, kPage}, remote{page, kPage};
      _exit(process_vm_readv(parent, &local, 1, &remote, 1, 0) == kPage ? 0 : 1);
    }
    pollfd fault{uffd, POLLIN, 0};
    waits = child > 0 && poll(&fault, 1, 5000) == 1;
    uffdio_zeropage zero{};
    zero.range = reg.range;
    ioctl(uffd, UFFDIO_ZEROPAGE, &zero);  // wakes the child, if it waits
    int status = 0;
    if (child > 0) waitpid(child, &status, 0);
    waits = waits && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  munmap(page, kPage);
  return waits;
}

/// Whether this process may stage a held-up copy (says so when not, as the tests then skip).
bool held_up_copies_run_here() {
  const int uffd = kernel_userfaultfd();
  if (uffd < 0) {
    WARN("userfaultfd is not available to this process: a held-up copy cannot be staged");
    return false;
  }
  const bool waits = remote_reads_wait_for_missing_pages(uffd);
  close(uffd);
  if (!waits) WARN("another process's read of missing pages does not wait for a userfaultfd here");
  return waits;
}

/// A send buffer whose first half and last page hold `content`'s, and whose pages between are
/// not there yet, registered with a userfaultfd: a peer's process_vm_readv of them stops in the
/// kernel until supply() puts `content`'s there. (The last page is there from the start: the
/// sender itself reads the message's last 8 bytes when it announces it.)
class HeldUpBuffer {
 public:
  static constexpr std::size_t kPage = 4096;

  explicit HeldUpBuffer(const std::vector<std::uint8_t>& content)
      : content_(content), uffd_(kernel_userfaultfd()) {
    expect(content.size() % (2 * kPage) == 0 && content.size() >= 4 * kPage,
           "a held-up buffer is whole pages, at least 4");
    expect(uffd_ >= 0, "userfaultfd in the rank");
    mapped_ =
        mmap(nullptr, content.size(), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    expect(mapped_ != MAP_FAILED, "mmap");
    std::memcpy(mapped_, content.data(), half());
    const std::size_t last = content.size() - kPage;
    std::memcpy(static_cast<std::uint8_t*>(mapped_) + last, content.data() + last, kPage);
    range_ = {reinterpret_cast<std::uintptr_t>(mapped_) + half(), held()};
    uffdio_register reg{};
    reg.range = range_;
    reg.mode = UFFDIO_REGISTER_MODE_MISSING;
    expect(ioctl(uffd_, UFFDIO_REGISTER, &reg) == 0, "registering the missing pages");
  }
  HeldUpBuffer(const HeldUpBuffer&) = delete;
  HeldUpBuffer& operator=(const HeldUpBuffer&) = delete;
  ~HeldUpBuffer() {
    close(uffd_);
    munmap(mapped_, content_.size());
  }

  const void* data() const { return mapped_; }
  /// Returns once a reader stopped at the missing pages (fails the rank after 20 s).
  void wait_for_reader() {
    pollfd fault{uffd_, POLLIN, 0};
    expect(poll(&fault, 1, 20000) == 1, "the peer's copy never reached the missing pages");
  }
  /// Puts the missing pages in (from page-aligned staging), which wakes the reader.
  void supply() {
    void* staged = nullptr;
    expect(posix_memalign(&staged, kPage, held()) == 0, "staging pages");
    std::memcpy(staged, content_.data() + half(), held());
    uffdio_copy copy{};
    copy.dst = range_.start;
    copy.src = reinterpret_cast<std::uintptr_t>(staged);
    copy.len = held();
    const int result = ioctl(uffd_, UFFDIO_COPY, &copy);
    free(staged);
    expect(result == 0, "supplying the missing pages");
  }

 private:
  std::size_t half() const { return content_.size() / 2; }
  std::size_t held() const { return half() - kPage; }  ///< the missing pages' bytes

  const std::vector<std::uint8_t>& content_;
  int uffd_;
  void* mapped_ = nullptr;
  uffdio_range range_{};
};

}  // namespace

TEST_CASE("fastbox: a rendezvous copy held up in the kernel holds up no other thread's exchanges",
          "[transport][multiproc][threads]") {
  // Rank 1's copy of rank 0's message (process_vm_readv) stops in the kernel at the buffer's
  // missing pages until rank 0 supplies them, which it does only after rank 1's main thread made
  // a round of small exchanges with it, while a second thread of rank 1 is inside that copy. A
  // copy made under the transport's lock would stop those exchanges (and rank 0's deadline would
  // fail them).
  if (!rendezvous_runs_here() || !held_up_copies_run_here()) return;
  REQUIRE_NOTHROW(cohort::launch(
      2,
      [](const cohort::Environment& env) {
        auto store = open_store(env);
        auto t = connect(*store, env);
        constexpr std::size_t kBytes = 160 * HeldUpBuffer::kPage;
        constexpr int kExchanges = 20;
        const Tag large = p2p_tag(13, 1), small = p2p_tag(0, 13);
        const int members[] = {0, 1};
        auto view = t->derive(members, env.rank, TagIdClaim(t->tag_ids(), 13));
        const auto content = payload(0, 1, kBytes, 130);
        const auto exchange_small = [&](int k) {
          const std::uint64_t out = 1000 * static_cast<std::uint64_t>(env.rank) + k;
          std::uint64_t in = 0;
          const int peer = 1 - env.rank;
          const Request both[] = {t->post_recv(peer, &in, sizeof in, small),
                                  t->post_send(peer, &out, sizeof out, small)};
          t->wait(both, after(10s), "a small exchange while a copy is held up");
          expect(in == 1000 * static_cast<std::uint64_t>(peer) + k, "small exchange value");
        };
        if (env.rank == 0) {
          HeldUpBuffer buffer(content);
          const Request s = view->post_send(1, buffer.data(), kBytes, large);
          buffer.wait_for_reader();
          store->set_string("copy held", "1");
          for (int k = 0; k < kExchanges; ++k) exchange_small(k);
          buffer.supply();
          view->wait(std::span<const Request>(&s, 1), after(30s), "the held-up send");
        } else {
          std::vector<std::uint8_t> in(kBytes, 0xEE);
          std::exception_ptr copy_failure;
          // Joined when the scope ends, so a failed check below fails the rank, not terminate().
          std::jthread copier([&] {
            try {
              const Request r = view->post_recv(0, in.data(), kBytes, large);
              view->wait(std::span<const Request>(&r, 1), after(60s), "the held-up receive");
            } catch (...) {
              copy_failure = std::current_exception();
            }
          });
          store->get("copy held", 30s);
          for (int k = 0; k < kExchanges; ++k) exchange_small(k);
          copier.join();
          if (copy_failure) std::rethrow_exception(copy_failure);
          expect_payload(in, 0, 1, 130, "the held-up message");
        }
        view.reset();
        barrier(*store, "done", env.rank, env.world_size);
      },
      bounded()));
}

TEST_CASE("fastbox: cancelling a receive whose copy another thread makes waits for the copy",
          "[transport][multiproc][threads]") {
  // Rank 1 posts a large receive on a view; a second thread, waiting on the world for a small
  // message, makes its copy (the next thread out of the transport's lock does), which stops in
  // the kernel at rank 0's missing pages. Rank 1's main thread then cancels the view: that may
  // release the receive (and hand its buffer back) only once the copy is over, so the buffer
  // holds the whole message when cancel_all returns. Rank 0 supplies the pages once told the
  // cancellation begins: a store round trip later, which in practice finds cancel_all waiting
  // (it reaches its wait in microseconds), but nothing orders the two. The test is sure to pass
  // when cancellation waits; without the wait it failed in every run tried (the buffer was
  // incomplete, or the copying thread found its receive released and the rank crashed).
  if (!rendezvous_runs_here() || !held_up_copies_run_here()) return;
  REQUIRE_NOTHROW(cohort::launch(
      2,
      [](const cohort::Environment& env) {
        auto store = open_store(env);
        auto t = connect(*store, env);
        constexpr std::size_t kBytes = 160 * HeldUpBuffer::kPage;
        const Tag large = p2p_tag(14, 1), small = p2p_tag(0, 14);
        const int members[] = {0, 1};
        auto view = t->derive(members, env.rank, TagIdClaim(t->tag_ids(), 14));
        const auto content = payload(0, 1, kBytes, 140);
        const std::uint64_t kSmallValue = 0x5A5A;
        if (env.rank == 0) {
          HeldUpBuffer buffer(content);
          const Request s = view->post_send(1, buffer.data(), kBytes, large);
          store->set_string("announced", "1");
          buffer.wait_for_reader();
          store->set_string("copy held", "1");
          store->get("cancelling", 30s);
          buffer.supply();
          const Request m = t->post_send(1, &kSmallValue, sizeof kSmallValue, small);
          t->wait(std::span<const Request>(&m, 1), after(30s), "the small message");
          // The copy was whole: the receiver acked it before its receive went.
          view->wait(std::span<const Request>(&s, 1), after(30s), "the held-up send");
        } else {
          store->get("announced", 30s);
          std::vector<std::uint8_t> in(kBytes, 0xEE);
          (void)view->post_recv(0, in.data(), kBytes, large);
          std::exception_ptr waiter_failure;
          std::uint64_t value = 0;
          // Joined when the scope ends, so a failed check below fails the rank, not terminate().
          std::jthread waiter([&] {
            try {
              const Request r = t->post_recv(0, &value, sizeof value, small);
              t->wait(std::span<const Request>(&r, 1), after(60s), "the small message");
            } catch (...) {
              waiter_failure = std::current_exception();
            }
          });
          store->get("copy held", 30s);
          store->set_string("cancelling", "1");
          view->cancel_all();
          expect_payload(in, 0, 1, 140, "the receive's buffer when cancel_all returned");
          waiter.join();
          if (waiter_failure) std::rethrow_exception(waiter_failure);
          expect(value == kSmallValue, "the small message's value");
        }
        view.reset();
        barrier(*store, "done", env.rank, env.world_size);
      },
      bounded()));
}

TEST_CASE("fastbox: a thousand rendezvous sends in flight before any receive all arrive",
          "[transport][multiproc]") {
  // Every one holds a seal word until its receiver acked it: the sender's pool of words grows
  // while they stand (more than two of its chunks), and the receiver reads each through the
  // sender's pid.
  if (!rendezvous_runs_here()) return;
  REQUIRE_NOTHROW(cohort::launch(
      2,
      [](const cohort::Environment& env) {
        auto store = open_store(env);
        auto t = connect(*store, env);
        // Four payloads, sent in turn, and one receive buffer (1064 buffers of this size would
        // take 279 MB a side): each receive is waited for and checked before the next is
        // posted, while the sends still stand.
        constexpr std::size_t kSends = 1064, kBytes = kSpreadLimit + 8, kPayloads = 4;
        const Tag tag = p2p_tag(15, 1);
        if (env.rank == 0) {
          std::vector<std::vector<std::uint8_t>> out;
          for (std::size_t j = 0; j < kPayloads; ++j)
            out.push_back(payload(0, 1, kBytes, 150 + static_cast<int>(j)));
          std::vector<Request> sends;
          for (std::size_t k = 0; k < kSends; ++k)
            sends.push_back(t->post_send(1, out[k % kPayloads].data(), kBytes, tag));
          for (const Request& send : sends)
            expect(!send.is_completed(), "a rendezvous send completed before its receive");
          store->set_string("posted", "1");
          wait_all(*t, sends, "sends");
        } else {
          store->get("posted", 30s);
          std::vector<std::uint8_t> in(kBytes);
          for (std::size_t k = 0; k < kSends; ++k) {
            std::fill(in.begin(), in.end(), std::uint8_t{0xEE});
            const Request r = t->post_recv(0, in.data(), kBytes, tag);
            t->wait(std::span<const Request>(&r, 1), after(30s), "receive " + std::to_string(k));
            expect_payload(in, 0, 1, 150 + static_cast<int>(k % kPayloads),
                           "message " + std::to_string(k));
          }
        }
        barrier(*store, "done", env.rank, env.world_size);
      },
      bounded()));
}

namespace {

/// How rank 1's receiver half is told to see the two routes in route_choice_run.
enum class Bias { RendezvousSlow, SpreadSlow, MeasuringOff };

/// Rank 0 sends rank 1 messages of two size classes in turn (100000 and 200000 bytes: both fit
/// the ring whole), each once rank 1 has posted its receive, and notes which were complete when
/// posted: a spread message is in the ring then, a rendezvous waits for rank 1's copy. Rank 1
/// adds a second to its timings of one route (`bias`), so the pair's verdict is known.
void route_choice_run(Bias bias) {
  REQUIRE_NOTHROW(cohort::launch(
      2,
      [bias](const cohort::Environment& env) {
        using Route = RingRouteChoice::Route;
        if (bias == Bias::MeasuringOff) {
          setenv("COHORT_MEASURED_CHOICE", "off", 1);
          cohort::reload_tunables();
        }
        if (env.rank == 1 && bias != Bias::MeasuringOff)
          ucx::testing::slow_receive_timings(
              bias == Bias::SpreadSlow ? Route::Spread : Route::Rendezvous, 1s);
        auto store = open_store(env);
        auto t = connect(*store, env);
        // Trials of each class: a block of each way (kTrials each), and more blocks where a
        // spread trial went through ring slots written for the first time (not timed).
        constexpr int kBlock = RingRouteChoice::kTrials;
        constexpr int kTrials = 2 * kBlock;
        constexpr int kPerClass = 2 * kTrials + 4;
        const std::size_t sizes[] = {100000, 200000};
        REQUIRE(RingRouteChoice::class_of(sizes[0]) != RingRouteChoice::class_of(sizes[1]));
        const Tag tag = p2p_tag(3, 7);
        for (int k = 0; k < 2 * kPerClass; ++k) {
          const std::size_t bytes = sizes[k % 2];
          const int salt = 300 + k;
          const std::string posted = "posted " + std::to_string(k);
          if (env.rank == 0) {
            const auto data = payload(0, 1, bytes, salt);
            store->get(posted, 30s);
            const Request s = t->post_send(1, data.data(), bytes, tag);
            const bool spread = s.is_completed();
            wait_all(*t, {s}, "send " + std::to_string(k));
            // Trials: a block of spread, a block of rendezvous; then every message takes the
            // verdict (by the last four of each class at the latest).
            const int i = k / 2;  // its place in its class
            if (i >= kTrials && i < kPerClass - 4 && bias != Bias::MeasuringOff) continue;
            const bool expected = bias == Bias::MeasuringOff ? true
                                  : i < kTrials              ? i < kBlock
                                                             : bias == Bias::RendezvousSlow;
            expect(spread == expected, "message " + std::to_string(i) + " of " +
                                           std::to_string(bytes) + " bytes went " +
                                           (spread ? "spread" : "by rendezvous"));
          } else {
            std::vector<std::uint8_t> in(bytes, 0xEE);
            const Request r = t->post_recv(0, in.data(), bytes, tag);
            store->set_string(posted, "1");
            wait_all(*t, {r}, "receive " + std::to_string(k));
            expect_payload(in, 0, 1, salt, "message " + std::to_string(k));
          }
        }
        barrier(*store, "done", env.rank, env.world_size);
      },
      bounded()));
}

}  // namespace

TEST_CASE(
    "fastbox: middle-sized messages take spread and rendezvous in turn until the verdict, "
    "which follows the receiver's timings",
    "[transport][multiproc]") {
  if (!rendezvous_runs_here()) return;
  SECTION("the rendezvous timed slower: spread") {
    route_choice_run(Bias::RendezvousSlow);
  }
  SECTION("the spread timed slower: rendezvous") {
    route_choice_run(Bias::SpreadSlow);
  }
  SECTION("COHORT_MEASURED_CHOICE=off: always spread") {
    route_choice_run(Bias::MeasuringOff);
  }
}

TEST_CASE("fastbox: middle-sized messages keep their order and bytes while their routes alternate",
          "[transport][multiproc]") {
  // Both ranks send each other every size class four times over (3 or 4 messages of each class
  // a round), among small, UCX-sized and rendezvous messages on one tag, posted before any
  // receive, then after the receives, in turn: a class's first 8 messages go spread and its
  // next 8 by rendezvous (RingRouteChoice's blocks), so from the third round on both kinds of
  // middle-sized message queue behind each other, and each receive must still meet its own.
  REQUIRE_NOTHROW(cohort::launch(
      2,
      [](const cohort::Environment& env) {
        auto store = open_store(env);
        auto t = connect(*store, env);
        const std::size_t sizes[] = {40000,  100000, 8,      200000, 300000, 70000,
                                     1000,   40001,  600000, 150000, 250000, 20000,
                                     400000, 65536,  131072, 262144, 524288, 32769};
        const int peer = 1 - env.rank;
        const Tag tag = p2p_tag(3, 8);
        for (int round = 0; round < 4; ++round) {
          const bool receives_first = round % 2 == 1;
          const int salt = 400 + 100 * round;
          std::vector<std::vector<std::uint8_t>> out, in;
          std::vector<Request> sends, recvs;
          const auto post_receives = [&] {
            for (const std::size_t bytes : sizes) {
              in.emplace_back(bytes, 0xEE);
              recvs.push_back(t->post_recv(peer, in.back().data(), bytes, tag));
            }
          };
          if (receives_first) post_receives();
          barrier(*store, "posted " + std::to_string(salt), env.rank, env.world_size);
          for (std::size_t k = 0; k < std::size(sizes); ++k) {
            out.push_back(payload(env.rank, peer, sizes[k], salt + static_cast<int>(k)));
            sends.push_back(t->post_send(peer, out.back().data(), sizes[k], tag));
          }
          if (!receives_first) post_receives();
          wait_all(*t, recvs, "receives");
          wait_all(*t, sends, "sends");
          for (std::size_t k = 0; k < std::size(sizes); ++k)
            expect_payload(in[k], peer, env.rank, salt + static_cast<int>(k),
                           "message " + std::to_string(k));
        }
        barrier(*store, "done", env.rank, env.world_size);
      },
      bounded()));
}
