// A send's seal (transport/send_seal.hpp) and the sealed read (transport/process_memory.hpp),
// within one process (process_vm_readv on its own pid): a read whose seal still stands returns
// the bytes; one whose seal was broken, or reused by a later send, fails with ECANCELED; seal
// values never repeat, and a moved seal stays sealed until its last owner goes.

#include "transport/send_seal.hpp"
#include "transport/process_memory.hpp"

#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <set>
#include <vector>

namespace {

using cohort::transport::read_sealed_process_memory;
using cohort::transport::SendSeal;

/// Whether this process may read its own memory through process_vm_readv (a seccomp policy
/// may forbid the call).
bool can_read_self() {
  std::uint64_t value = 42, seen = 0;
  return cohort::transport::read_process_once(getpid(), &seen, &value, sizeof value) ==
             static_cast<ssize_t>(sizeof value) &&
         seen == 42;
}

/// The last 8 bytes of `from`, as a sender announces them.
std::uint64_t tail_of(const std::vector<std::uint8_t>& from) {
  std::uint64_t tail = 0;
  const std::size_t n = std::min<std::size_t>(from.size(), sizeof tail);
  std::memcpy(&tail, from.data() + from.size() - n, n);
  return tail;
}

int sealed_read(std::vector<std::uint8_t>& into, const std::vector<std::uint8_t>& from,
                std::uint64_t seal_at, std::uint64_t seal) {
  return read_sealed_process_memory(getpid(), into.data(), from.data(), from.size(), seal_at, seal,
                                    tail_of(from));
}

}  // namespace

TEST_CASE("send seal: a sealed read returns the bytes while the seal stands, ECANCELED after",
          "[send_seal]") {
  if (!can_read_self()) {
    WARN("process_vm_readv on this process is not allowed here");
    return;
  }
  // Sizes around the tail the seal is read into (shorter than it: the seal in a call of its own),
  // one large.
  const std::size_t bytes = GENERATE(std::size_t{5}, std::size_t{8}, std::size_t{9},
                                     std::size_t{100000}, std::size_t{3 << 20} + 5);
  CAPTURE(bytes);
  std::vector<std::uint8_t> buffer(bytes);
  for (std::size_t i = 0; i < buffer.size(); ++i) buffer[i] = static_cast<std::uint8_t>(i * 7);
  std::vector<std::uint8_t> into(buffer.size(), 0xEE);

  auto seal = SendSeal::make();
  REQUIRE(seal);
  const std::uint64_t at = seal.location(), value = seal.value();
  REQUIRE(value != 0);
  CHECK(sealed_read(into, buffer, at, value) == 0);
  CHECK(into == buffer);  // the seal, read into the last 8 bytes' place, is not left there
#if defined(__x86_64__) || defined(__i386__)
  // There the last 8 bytes are the announced ones, not read (so a sender may not change them
  // while its send stands, as it may change none of its buffer).
  if (bytes >= 8) {
    const std::uint64_t announced = 0x0123456789abcdefULL;
    REQUIRE(read_sealed_process_memory(getpid(), into.data(), buffer.data(), bytes, at, value,
                                       announced) == 0);
    std::uint64_t last = 0;
    std::memcpy(&last, into.data() + bytes - 8, 8);
    CHECK(last == announced);
    CHECK(std::equal(into.begin(), into.end() - 8, buffer.begin()));
  }
#endif

  CHECK(sealed_read(into, buffer, at, value + 1) == ECANCELED);  // another send's value

  seal = SendSeal();  // broken: the send was released
  CHECK(sealed_read(into, buffer, at, value) == ECANCELED);

  // The word goes to a later send, with a value of its own: the old announcement stays stale.
  std::vector<SendSeal> later;
  for (int i = 0; i < 2000; ++i) later.push_back(SendSeal::make());
  CHECK(sealed_read(into, buffer, at, value) == ECANCELED);
  for (const SendSeal& s : later) {
    REQUIRE(s.value() != value);
    if (s.location() == at) CHECK(sealed_read(into, buffer, at, s.value()) == 0);
  }
}

TEST_CASE("send seal: values never repeat; a moved seal holds until its last owner breaks it",
          "[send_seal]") {
  std::set<std::uint64_t> values;
  for (int round = 0; round < 3; ++round) {
    std::vector<SendSeal> seals;
    for (int i = 0; i < 700; ++i) {  // more than one chunk of words
      seals.push_back(SendSeal::make());
      REQUIRE(values.insert(seals.back().value()).second);
    }
  }

  SendSeal first = SendSeal::make();
  const auto* word = reinterpret_cast<const std::atomic<std::uint64_t>*>(first.location());
  const std::uint64_t value = first.value();
  SendSeal second = std::move(first);
  CHECK_FALSE(first);  // NOLINT(bugprone-use-after-move): moved-from is empty by contract
  CHECK(word->load() == value);
  first = SendSeal();  // releasing the moved-from one breaks nothing
  CHECK(word->load() == value);
  second = SendSeal();
  CHECK(word->load() == 0);
}

TEST_CASE(
    "send seal: a read of memory that is not there fails with its errno, unless the seal "
    "was broken or is not there",
    "[send_seal]") {
  if (!can_read_self()) {
    WARN("process_vm_readv on this process is not allowed here");
    return;
  }
  auto seal = SendSeal::make();
  std::vector<std::uint8_t> into(64);
  CHECK(read_sealed_process_memory(getpid(), into.data(), nullptr, into.size(), seal.location(),
                                   seal.value(), 0) == EFAULT);
  // A standing send's seal word is always there (they are never freed): one that is not is no
  // sender's, and the read fails as for a withdrawn send.
  std::vector<std::uint8_t> buffer(64, 1);
  CHECK(read_sealed_process_memory(getpid(), into.data(), buffer.data(), buffer.size(), 8,
                                   seal.value(), 0) == ECANCELED);
  // Unless the seal was broken: then the buffer may have gone with its withdrawn send.
  const std::uint64_t at = seal.location(), value = seal.value();
  seal = SendSeal();
  CHECK(read_sealed_process_memory(getpid(), into.data(), nullptr, into.size(), at, value, 0) ==
        ECANCELED);
}
