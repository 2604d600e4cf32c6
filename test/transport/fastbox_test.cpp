// The fastbox ring on its own, in one process (its inbox mapped a second time through
// /proc/self, as a peer maps it): messages come out in order with their tag, size and bytes; a ring
// holds exactly kDepth messages the receiver has not taken; slots are reused across many laps; a
// sender learns when the receiver counted itself asleep; rendezvous announcements and acks keep
// their kind and body among inline messages.

#include "transport/fastbox.hpp"

#include <catch2/catch.hpp>

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
#include <vector>

namespace {

using cohort::transport::Fastbox;
using Room = Fastbox::Sender::RoomRequest;

std::vector<std::byte> bytes_of(std::uint64_t n, std::size_t count) {
  std::vector<std::byte> data(count);
  for (std::size_t i = 0; i < count; ++i) data[i] = static_cast<std::byte>((n * 31 + i * 7) & 0xff);
  return data;
}

struct Pair {
  Fastbox inbox;
  Fastbox mapped;  // the same segment as a peer sees it
};

Pair make_pair(int rings) {
  const int fd = Fastbox::create_inbox_fd();
  REQUIRE(fd >= 0);
  Pair pair;
  pair.inbox = Fastbox::map_inbox(fd, rings);
  REQUIRE(pair.inbox);
  pair.mapped = Fastbox::map_peer_inbox(getpid(), pair.inbox.fd(), rings);
  REQUIRE(pair.mapped);
  return pair;
}

}  // namespace

TEST_CASE("fastbox: messages arrive in order with tag, size, count and bytes, across laps",
          "[fastbox]") {
  Pair pair = make_pair(3);
  Fastbox::Sender sender = pair.mapped.sender(2);
  Fastbox::Receiver receiver = pair.inbox.receiver(2);
  Fastbox::Receiver other = pair.inbox.receiver(1);  // another sender's ring stays empty
  CHECK_FALSE(receiver.peek().has_value());
  // Sizes 0, 1, 64 and the largest a slot takes in turn, over 5 laps.
  const std::size_t sizes[] = {0, 1, 64, Fastbox::kInlineBytes};
  for (std::uint64_t n = 0; n < 5 * Fastbox::kDepth; ++n) {
    const std::size_t size = sizes[n % 4];
    const auto data = bytes_of(n, size);
    const auto large_before = static_cast<std::uint32_t>(n * 0x01010101u);  // every byte
    REQUIRE(sender.try_send({1000 + n, size, large_before}, data.data()) ==
            Fastbox::Sender::Outcome::Sent);
    const auto message = receiver.peek();
    REQUIRE(message.has_value());
    CHECK(message->tag == 1000 + n);
    CHECK(message->bytes == size);
    CHECK(message->large_before == large_before);
    std::vector<std::byte> got(size, std::byte{0xEE});
    receiver.read(*message, got.data());
    CHECK(got == data);
    receiver.pop();
    CHECK_FALSE(receiver.peek().has_value());
    CHECK_FALSE(other.peek().has_value());
  }
}

TEST_CASE("fastbox: a ring holds kDepth untaken messages, and takes more as they are taken",
          "[fastbox]") {
  Pair pair = make_pair(2);
  Fastbox::Sender sender = pair.mapped.sender(0);
  Fastbox::Receiver receiver = pair.inbox.receiver(0);
  std::uint64_t value = 0;
  for (std::uint64_t n = 0; n < Fastbox::kDepth; ++n) {
    value = n;
    REQUIRE(sender.try_send({n, sizeof value}, &value) == Fastbox::Sender::Outcome::Sent);
  }
  value = 999;
  CHECK(sender.try_send({99, sizeof value}, &value) == Fastbox::Sender::Outcome::Full);
  // Taking one frees one slot, no more.
  REQUIRE(receiver.peek().has_value());
  receiver.pop();
  value = Fastbox::kDepth;
  CHECK(sender.try_send({Fastbox::kDepth, sizeof value}, &value) == Fastbox::Sender::Outcome::Sent);
  CHECK(sender.try_send({99, sizeof value}, &value) == Fastbox::Sender::Outcome::Full);
  // The rest come out in order, the refused ones nowhere.
  for (std::uint64_t n = 1; n <= Fastbox::kDepth; ++n) {
    const auto message = receiver.peek();
    REQUIRE(message.has_value());
    CHECK(message->tag == n);
    std::uint64_t got = 0;
    receiver.read(*message, &got);
    CHECK(got == n);
    receiver.pop();
  }
  CHECK_FALSE(receiver.peek().has_value());
}

TEST_CASE("fastbox: rendezvous announcements and acks come out as such among inline messages",
          "[fastbox]") {
  Pair pair = make_pair(2);
  Fastbox::Sender sender = pair.mapped.sender(1);
  Fastbox::Receiver receiver = pair.inbox.receiver(1);
  using Kind = Fastbox::Kind;
  // A size beyond 32 bits, and every byte of address, cookie, seal and tail distinct.
  const std::uint64_t huge = (std::uint64_t{5} << 32) + 12345;
  const std::uint64_t address = 0x1122334455667788ull, cookie = 0x99aabbccddeeff01ull;
  const std::uint64_t seal_at = 0x0213243546576879ull, seal = 0x8a9bacbdcedfe0f1ull;
  const std::uint64_t tail = 0x1c2d3e4f50617283ull;
  const std::uint64_t sent_at = 0x2e3f40516273849full;
  // An inline message of the largest size a slot takes.
  const auto largest = bytes_of(7, Fastbox::kInlineBytes);
  // Three messages a lap: the slots go round the ring three times.
  for (int lap = 0; lap < static_cast<int>(Fastbox::kDepth) + 2; ++lap) {
    REQUIRE(sender.try_send_rendezvous({77, huge, 3, Kind::Rendezvous, sent_at + lap},
                                       {address + lap, cookie, seal_at, seal + lap, tail - lap}) ==
            Fastbox::Sender::Outcome::Sent);
    REQUIRE(sender.try_send({78, largest.size(), 4}, largest.data()) ==
            Fastbox::Sender::Outcome::Sent);
    REQUIRE(sender.try_send_ack({cookie + lap, -lap}) == Fastbox::Sender::Outcome::Sent);

    auto message = receiver.peek();
    REQUIRE(message.has_value());
    CHECK(message->kind == Kind::Rendezvous);
    CHECK(message->tag == 77);
    CHECK(message->bytes == huge);
    CHECK(message->large_before == 3);
    const Fastbox::Rendezvous body = receiver.rendezvous();
    CHECK(body.address == address + lap);
    CHECK(body.cookie == cookie);
    CHECK(body.seal_at == seal_at);
    CHECK(body.seal == seal + lap);
    CHECK(body.tail == tail - static_cast<std::uint64_t>(lap));
    CHECK(body.sent_at == sent_at + static_cast<std::uint64_t>(lap));
    receiver.pop();

    message = receiver.peek();
    REQUIRE(message.has_value());
    CHECK(message->kind == Kind::Inline);
    CHECK(message->tag == 78);
    CHECK(message->bytes == largest.size());
    std::vector<std::byte> got(largest.size());
    receiver.read(*message, got.data());
    CHECK(got == largest);
    receiver.pop();

    message = receiver.peek();
    REQUIRE(message.has_value());
    CHECK(message->kind == Kind::Ack);
    CHECK(message->bytes == 0);
    const Fastbox::Ack ack = receiver.ack();
    CHECK(ack.cookie == cookie + lap);
    CHECK(ack.error == -lap);
    receiver.pop();
    CHECK_FALSE(receiver.peek().has_value());
  }
}

TEST_CASE(
    "fastbox: a spread message comes out whole across slots and laps, in parts when "
    "larger than the free slots",
    "[fastbox]") {
  Pair pair = make_pair(2);
  Fastbox::Sender sender = pair.mapped.sender(1);
  Fastbox::Receiver receiver = pair.inbox.receiver(1);
  using Kind = Fastbox::Kind;
  using Outcome = Fastbox::Sender::Outcome;
  std::uint64_t value = 7;
  // Three slots taken by inline messages first, so the spread messages below wrap the ring.
  for (int n = 0; n < 3; ++n) REQUIRE(sender.try_send({1, sizeof value}, &value) == Outcome::Sent);
  for (int n = 0; n < 3; ++n) {
    const auto message = receiver.peek();
    REQUIRE(message.has_value());
    CHECK(message->kind == Kind::Inline);
    receiver.pop();
  }
  // Sizes that fill the last piece exactly, leave it one byte, fill every slot, and need two
  // rings' worth.
  const std::size_t sizes[] = {2 * Fastbox::kInlineBytes, 2 * Fastbox::kInlineBytes + 1,
                               Fastbox::kSpreadBytes, 100000, 2 * Fastbox::kSpreadBytes - 5};
  for (std::size_t k = 0; k < std::size(sizes); ++k) {
    CAPTURE(sizes[k]);
    const auto data = bytes_of(k + 11, sizes[k]);
    std::uint64_t sent = 0;
    REQUIRE(sender.try_send_spread({500 + k, sizes[k], 3}, data.data(), sent) == Outcome::Sent);
    CHECK(sent == std::min(sizes[k], Fastbox::kSpreadBytes));
    const auto message = receiver.peek();
    REQUIRE(message.has_value());
    CHECK(message->kind == Kind::Spread);
    CHECK(message->tag == 500 + k);
    CHECK(message->bytes == sizes[k]);
    CHECK(message->large_before == 3);
    std::vector<std::byte> got(sizes[k], std::byte{0xEE});
    auto taken = receiver.take_spread(sizes[k], got.data(), 0);
    CHECK(taken.done == sent);
    CHECK_FALSE(taken.withdrawn);
    // The rest, as the ring has room again: nothing more to take until it is sent.
    while (sent < sizes[k]) {
      CHECK(receiver.take_spread(sizes[k], got.data(), taken.done).done == taken.done);
      REQUIRE(sender.try_send_spread({500 + k, sizes[k], 3}, data.data(), sent) == Outcome::Sent);
      taken = receiver.take_spread(sizes[k], got.data(), taken.done);
      CHECK(taken.done == sent);
    }
    CHECK(got == data);
    CHECK_FALSE(receiver.peek().has_value());
  }
  // With three slots taken, a message that fits in the ring waits for room for all of it, and
  // one larger than the ring for a quarter of the ring.
  {
    for (int n = 0; n < 3; ++n)
      REQUIRE(sender.try_send({2, sizeof value}, &value) == Outcome::Sent);
    const auto fits = bytes_of(4, Fastbox::kSpreadBytes);
    std::uint64_t none = 0;
    CHECK(sender.try_send_spread({800, fits.size(), 0}, fits.data(), none) == Outcome::Full);
    CHECK(none == 0);
    // Fill all but 15 slots with small messages: too few for a larger message's first part.
    for (std::uint64_t n = 3; n < Fastbox::kDepth - Fastbox::kDepth / 4 + 1; ++n)
      REQUIRE(sender.try_send({2, sizeof value}, &value) == Outcome::Sent);
    const auto larger = bytes_of(5, Fastbox::kSpreadBytes + 1);
    CHECK(sender.try_send_spread({801, larger.size(), 0}, larger.data(), none) == Outcome::Full);
    CHECK(none == 0);
    REQUIRE(receiver.peek().has_value());
    receiver.pop();  // 16 free now
    CHECK(sender.try_send_spread({801, larger.size(), 0}, larger.data(), none) == Outcome::Sent);
    CHECK(none == Fastbox::kDepth / 4 * Fastbox::kInlineBytes);
    // Drain: the small messages, then the part of the larger one, which is then withdrawn.
    for (std::uint64_t n = 1; n < Fastbox::kDepth - Fastbox::kDepth / 4 + 1; ++n) {
      const auto message = receiver.peek();
      REQUIRE(message.has_value());
      REQUIRE(message->kind == Kind::Inline);
      receiver.pop();
    }
    REQUIRE(receiver.peek().has_value());
    CHECK(receiver.take_spread(larger.size(), nullptr, 0).done == none);
    REQUIRE(sender.try_send_withdrawal() == Outcome::Sent);
    const auto taken = receiver.take_spread(larger.size(), nullptr, none);
    CHECK(taken.withdrawn);
    CHECK_FALSE(receiver.peek().has_value());
  }
  // A full ring takes no piece.
  const auto data = bytes_of(3, 3 * Fastbox::kSpreadBytes);
  std::uint64_t sent = 0;
  REQUIRE(sender.try_send_spread({700, data.size(), 0}, data.data(), sent) == Outcome::Sent);
  const std::uint64_t first = sent;
  CHECK(sender.try_send_spread({700, data.size(), 0}, data.data(), sent) == Outcome::Full);
  CHECK(sent == first);
  // Taken, dropped (no buffer), then withdrawn after a second part: the withdrawal ends it, and
  // the inline message behind it comes out as such.
  REQUIRE(receiver.peek().has_value());
  auto taken = receiver.take_spread(data.size(), nullptr, 0);
  CHECK(taken.done == first);
  REQUIRE(sender.try_send_spread({700, data.size(), 0}, data.data(), sent) == Outcome::Sent);
  CHECK(sender.try_send_withdrawal() == Outcome::Full);  // the second part filled the ring
  taken = receiver.take_spread(data.size(), nullptr, taken.done);
  CHECK(taken.done == sent);
  CHECK_FALSE(taken.withdrawn);
  REQUIRE(sender.try_send_withdrawal() == Outcome::Sent);
  REQUIRE(sender.try_send({701, sizeof value}, &value) == Outcome::Sent);
  taken = receiver.take_spread(data.size(), nullptr, taken.done);
  CHECK(taken.withdrawn);
  CHECK(taken.done == sent);
  const auto next = receiver.peek();
  REQUIRE(next.has_value());
  CHECK(next->kind == Kind::Inline);
  CHECK(next->tag == 701);
  receiver.pop();
  CHECK_FALSE(receiver.peek().has_value());
}

TEST_CASE("fastbox: a sender is told when the receiver is asleep", "[fastbox]") {
  Pair pair = make_pair(2);
  Fastbox::Sender sender = pair.mapped.sender(1);
  const std::uint32_t value = 7;
  CHECK(sender.try_send({1, sizeof value}, &value) == Fastbox::Sender::Outcome::Sent);
  pair.inbox.set_sleeping(true);
  CHECK(sender.try_send({2, sizeof value}, &value) == Fastbox::Sender::Outcome::SentToSleeper);
  pair.inbox.set_sleeping(false);
  CHECK(sender.try_send({3, sizeof value}, &value) == Fastbox::Sender::Outcome::Sent);
}

TEST_CASE("fastbox: a spread message's sender is told when the receiver is asleep", "[fastbox]") {
  Pair pair = make_pair(1);
  Fastbox::Sender sender = pair.mapped.sender(0);
  Fastbox::Receiver receiver = pair.inbox.receiver(0);
  const auto data = bytes_of(1, 3 * Fastbox::kInlineBytes);
  std::uint64_t sent = 0;
  CHECK(sender.try_send_spread({1, data.size(), 0}, data.data(), sent) ==
        Fastbox::Sender::Outcome::Sent);
  pair.inbox.set_sleeping(true);
  sent = 0;
  CHECK(sender.try_send_spread({2, data.size(), 0}, data.data(), sent) ==
        Fastbox::Sender::Outcome::SentToSleeper);
  pair.inbox.set_sleeping(false);
  for (int n = 0; n < 2; ++n) {
    REQUIRE(receiver.peek().has_value());
    CHECK(receiver.take_spread(data.size(), nullptr, 0).done == data.size());
  }
  CHECK_FALSE(receiver.peek().has_value());
}

TEST_CASE("fastbox: a spread message withdrawn outside the ring ends where its sender said",
          "[fastbox]") {
  // A message larger than the ring goes in with its first part; its sender withdraws it without
  // a Withdrawal piece (the ring is full) and tells the receiver written(), where it ends. The
  // receiver takes the part and stops there, withdrawn, and the next message, written after,
  // comes out whole.
  Pair pair = make_pair(1);
  Fastbox::Sender sender = pair.mapped.sender(0);
  Fastbox::Receiver receiver = pair.inbox.receiver(0);
  const auto data = bytes_of(4, Fastbox::kSpreadBytes + 2 * Fastbox::kInlineBytes);
  std::uint64_t done = 0;
  REQUIRE(sender.try_send_spread({7, data.size(), 0}, data.data(), done) ==
          Fastbox::Sender::Outcome::Sent);
  REQUIRE(done == Fastbox::kSpreadBytes);  // the whole ring, no more
  const std::uint64_t end = sender.written();
  CHECK(end == Fastbox::kDepth);
  REQUIRE(receiver.peek().has_value());
  std::vector<std::byte> got(data.size(), std::byte{0xEE});
  // Before `end` is known: the part, and a wait for more.
  auto taken = receiver.take_spread(data.size(), got.data(), 0);
  CHECK(taken.done == Fastbox::kSpreadBytes);
  CHECK_FALSE(taken.withdrawn);
  CHECK(std::equal(data.begin(), data.begin() + Fastbox::kSpreadBytes, got.begin()));
  const std::uint32_t value = 5;
  REQUIRE(sender.try_send({8, sizeof value}, &value) == Fastbox::Sender::Outcome::Sent);
  // The next message's slot before `end` is known: left in the ring, as if nothing had come.
  taken = receiver.take_spread(data.size(), got.data(), taken.done);
  CHECK(taken.done == Fastbox::kSpreadBytes);
  CHECK_FALSE(taken.withdrawn);
  // Then told where it ends: withdrawn, and the inline message after it is left in the ring.
  taken = receiver.take_spread(data.size(), got.data(), taken.done, end);
  CHECK(taken.withdrawn);
  CHECK(taken.done == Fastbox::kSpreadBytes);
  const auto next = receiver.peek();
  REQUIRE(next.has_value());
  CHECK(next->tag == 8);
  CHECK(next->kind == Fastbox::Kind::Inline);
}

TEST_CASE("fastbox: a sender asking for room hears once the receiver has made that much",
          "[fastbox]") {
  Pair pair = make_pair(1);
  Fastbox::Sender sender = pair.mapped.sender(0);
  Fastbox::Receiver receiver = pair.inbox.receiver(0);
  const std::uint32_t value = 7;
  // Nothing refused: nothing to ask for.
  CHECK(sender.want_room() == Room::NotAsked);
  for (std::uint64_t n = 0; n < Fastbox::kDepth; ++n)
    REQUIRE(sender.try_send({n, sizeof value}, &value) == Fastbox::Sender::Outcome::Sent);
  CHECK_FALSE(receiver.room_made());  // no pops
  REQUIRE(sender.try_send({99, sizeof value}, &value) == Fastbox::Sender::Outcome::Full);
  CHECK(sender.want_room() == Room::Asked);  // asked: one slot
  CHECK_FALSE(receiver.room_made());
  REQUIRE(receiver.peek().has_value());
  receiver.pop();
  CHECK(receiver.room_made());
  CHECK_FALSE(receiver.room_made());        // answered once
  CHECK(sender.want_room() == Room::Fits);  // the slot is free already: look again, do not sleep
  REQUIRE(sender.try_send({Fastbox::kDepth, sizeof value}, &value) ==
          Fastbox::Sender::Outcome::Sent);
  CHECK(sender.want_room() == Room::NotAsked);  // the write went in: nothing refused since

  // A spread message that fits in the ring waits for room for all of it: 20 slots.
  const auto data = bytes_of(3, 20 * Fastbox::kInlineBytes);
  std::uint64_t done = 0;
  REQUIRE(sender.try_send_spread({500, data.size(), 0}, data.data(), done) ==
          Fastbox::Sender::Outcome::Full);
  CHECK(sender.want_room() == Room::Asked);
  for (int n = 0; n < 19; ++n) {
    REQUIRE(receiver.peek().has_value());
    receiver.pop();
    CHECK_FALSE(receiver.room_made());  // 1 to 19 slots free: not yet
  }
  REQUIRE(receiver.peek().has_value());
  receiver.pop();
  CHECK(receiver.room_made());
  REQUIRE(sender.try_send_spread({500, data.size(), 0}, data.data(), done) ==
          Fastbox::Sender::Outcome::Sent);
  CHECK(done == data.size());

  // Two refusals before a write: the smaller want is asked for (an ack or a Withdrawal may go
  // before a spread message's rest).
  done = 0;
  REQUIRE(sender.try_send_spread({501, data.size(), 0}, data.data(), done) ==
          Fastbox::Sender::Outcome::Full);
  REQUIRE(sender.try_send_ack({1, 0}) == Fastbox::Sender::Outcome::Full);
  CHECK(sender.want_room() == Room::Asked);
  REQUIRE(receiver.peek().has_value());
  receiver.pop();
  CHECK(receiver.room_made());

  // Refusals forgotten (the owner's next round tries its writes again): nothing to ask for
  // until one is refused again, and then only that one (20 slots, not the ack's 1).
  sender.forget_refusals();
  CHECK(sender.want_room() == Room::NotAsked);
  REQUIRE(sender.try_send_spread({501, data.size(), 0}, data.data(), done) ==
          Fastbox::Sender::Outcome::Full);
  CHECK(sender.want_room() == Room::Asked);
  REQUIRE(receiver.peek().has_value());
  receiver.pop();
  CHECK_FALSE(receiver.room_made());  // 2 free of the 20 asked for
}

TEST_CASE("fastbox: a sender asleep for room is woken by the receiver's pops in another process",
          "[fastbox]") {
  // The sender (this process) fills the ring with 1-slot messages and spread ones (one that fits
  // in the ring, one that goes in parts); whenever a write is refused it asks for room and waits
  // on a pipe that the receiver (a child) writes only when room_made() says it made the room
  // asked for. A lost request or a missed look at it leaves the sender waiting until its 20 s
  // deadline. The receiver checks every message's number and bytes.
  Pair pair = make_pair(1);
  int doorbell[2];
  REQUIRE(pipe(doorbell) == 0);
  constexpr std::uint64_t kMessages = 4000;
  const auto fits = bytes_of(9, 6 * Fastbox::kInlineBytes + 5);
  const auto parts = bytes_of(10, Fastbox::kSpreadBytes + 3 * Fastbox::kInlineBytes);
  const auto payload = [&](std::uint64_t n) -> const std::vector<std::byte>* {
    if (n % 10 == 9) return &fits;
    if (n % 100 == 42) return &parts;
    return nullptr;
  };
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    close(doorbell[0]);
    Fastbox::Receiver receiver = pair.inbox.receiver(0);
    std::vector<std::byte> got(parts.size());
    std::optional<Fastbox::Message> spreading;  // a spread message partly taken
    std::uint64_t taken = 0;
    int code = 0;
    for (std::uint64_t n = 0; n < kMessages && code == 0;) {
      // Up to 1-7 messages (or one call for a spread message's pieces) before looking for a
      // request, as the hub looks once per round.
      for (std::uint64_t batch = n % 7 + 1; batch > 0 && n < kMessages; --batch) {
        if (!spreading) {
          spreading = receiver.peek();
          if (!spreading) break;
          if (spreading->tag != n) code = 2;
          if (spreading->kind != Fastbox::Kind::Spread) {
            std::uint64_t number = 0;
            receiver.read(*spreading, &number);
            if (number != n || payload(n) != nullptr) code = 3;
            receiver.pop();
            spreading.reset();
            ++n;
            continue;
          }
          taken = 0;
        }
        taken = receiver.take_spread(spreading->bytes, got.data(), taken).done;
        if (taken < spreading->bytes) break;  // the rest comes once the sender has room
        const auto* expected = payload(n);
        if (expected == nullptr || spreading->bytes != expected->size() ||
            !std::equal(expected->begin(), expected->end(), got.begin()))
          code = 4;
        spreading.reset();
        ++n;
      }
      if (receiver.room_made() && write(doorbell[1], "r", 1) != 1) code = 5;
    }
    _exit(code);
  }
  close(doorbell[1]);
  // A failed REQUIRE below leaves no receiver spinning.
  struct Reaper {
    pid_t pid;
    ~Reaper() {
      if (pid > 0) {
        kill(pid, SIGKILL);
        waitpid(pid, nullptr, 0);
      }
    }
  } reaper{child};
  Fastbox::Sender sender = pair.mapped.sender(0);
  std::uint64_t waits = 0;
  for (std::uint64_t n = 0; n < kMessages; ++n) {
    const auto* data = payload(n);
    std::uint64_t done = 0;
    for (;;) {
      const auto outcome = data != nullptr
                               ? sender.try_send_spread({n, data->size(), 0}, data->data(), done)
                               : sender.try_send({n, sizeof n}, &n);
      if (outcome != Fastbox::Sender::Outcome::Full) {
        if (data == nullptr || done == data->size()) break;
        continue;  // the rest of a spread message
      }
      const Room request = sender.want_room();
      if (request == Room::Fits) continue;  // room came meanwhile
      REQUIRE(request == Room::Asked);      // (NotAsked: the kernel refused membarrier())
      ++waits;
      pollfd bell{doorbell[0], POLLIN, 0};
      REQUIRE(poll(&bell, 1, 20000) == 1);  // else the receiver never answered the request
      char byte;
      REQUIRE(read(doorbell[0], &byte, 1) == 1);
    }
  }
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  reaper.pid = 0;
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  close(doorbell[0]);
  WARN("the sender waited for room " << waits << " times");
}

TEST_CASE("fastbox: a segment smaller than its ring count needs is not mapped", "[fastbox]") {
  const int fd = Fastbox::create_inbox_fd();
  REQUIRE(fd >= 0);
  const Fastbox inbox = Fastbox::map_inbox(fd, 2);
  REQUIRE(inbox);
  CHECK_FALSE(Fastbox::map_peer_inbox(getpid(), inbox.fd(), 3));
  CHECK(Fastbox::map_peer_inbox(getpid(), inbox.fd(), 2));
  CHECK_FALSE(Fastbox::map_peer_inbox(getpid(), 1 << 20, 2));  // no such descriptor
}

TEST_CASE("fastbox: a receiver's timings reach its own ring's sender, per class, once published",
          "[fastbox]") {
  auto pair = make_pair(3);
  Fastbox::Sender sender = pair.mapped.sender(1);
  Fastbox::Receiver receiver = pair.inbox.receiver(1);
  Fastbox::Sender other = pair.mapped.sender(2);  // another sender's ring
  for (int c = 0; c < Fastbox::kTimedClasses; ++c) CHECK_FALSE(sender.receiver_timings(c));
  receiver.publish_timings(2, 31000, 17000);
  receiver.publish_timings(0, 4000, 9000);
  CHECK_FALSE(sender.receiver_timings(1));
  CHECK_FALSE(sender.receiver_timings(3));
  REQUIRE(sender.receiver_timings(2));
  CHECK(*sender.receiver_timings(2) == std::pair<std::uint32_t, std::uint32_t>{31000, 17000});
  REQUIRE(sender.receiver_timings(0));
  CHECK(*sender.receiver_timings(0) == std::pair<std::uint32_t, std::uint32_t>{4000, 9000});
  for (int c = 0; c < Fastbox::kTimedClasses; ++c) CHECK_FALSE(other.receiver_timings(c));
  // The timings' line is not a slot: messages still go through the ring as before.
  const std::uint8_t byte = 42;
  REQUIRE(sender.try_send({7, 1, 0}, &byte) == Fastbox::Sender::Outcome::Sent);
  const auto message = receiver.peek();
  REQUIRE(message);
  CHECK(message->tag == 7);
  CHECK(message->bytes == 1);
}

TEST_CASE("fastbox: a spread message's pieces after the first bring its sent_at, and its tag stays",
          "[fastbox]") {
  Pair pair = make_pair(1);
  Fastbox::Sender sender = pair.mapped.sender(0);
  Fastbox::Receiver receiver = pair.inbox.receiver(0);
  const std::uint64_t sent_at = 0x0123456789abcdefull;
  const auto data = bytes_of(9, 3 * Fastbox::kInlineBytes + 5);  // four pieces
  std::uint64_t sent = 0;
  REQUIRE(sender.try_send_spread({61, data.size(), 2, Fastbox::Kind::Spread, sent_at}, data.data(),
                                 sent) == Fastbox::Sender::Outcome::Sent);
  const auto message = receiver.peek();
  REQUIRE(message);
  CHECK(message->kind == Fastbox::Kind::Spread);
  CHECK(message->tag == 61);
  CHECK(message->bytes == data.size());
  std::vector<std::byte> got(data.size());
  const auto taken = receiver.take_spread(data.size(), got.data(), 0);
  CHECK(taken.done == data.size());
  CHECK_FALSE(taken.withdrawn);
  CHECK(taken.sent_at == sent_at);
  CHECK(got == data);
}
