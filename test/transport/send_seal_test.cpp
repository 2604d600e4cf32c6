// A send's seal (transport/send_seal.hpp) and the sealed read (transport/process_memory.hpp),
// within one process (process_vm_readv on its own pid): a read whose seal still stands returns
// the bytes; one whose seal was broken, or reused by a later send, fails with ECANCELED; seal
// values never repeat, and a moved seal stays sealed until its last owner goes. And across
// processes: a read through a dead sender's pid, which another process took meanwhile, fails.

#include "transport/send_seal.hpp"
#include "transport/process_memory.hpp"

#include <catch2/catch.hpp>

#include <linux/sched.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>

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

/// A child of this process that fills `buffer` with `fill` and stores `seal` at `*seal_word`
/// (its own copies of this process's memory), says so on `ready`, and then waits to be killed
/// (or dies with this process). With `pid` > 0 the child gets that pid (clone3's set_tid, which
/// needs CAP_SYS_ADMIN): -1 with errno when the kernel refuses. Only async-signal-safe calls in
/// the child: it is not made by fork(), and the libraries' fork handlers do not run in it.
pid_t start_holder(pid_t pid, std::vector<std::uint8_t>& buffer, std::uint8_t fill,
                   std::uint64_t* seal_word, std::uint64_t seal, int ready) {
  clone_args args{};
  args.exit_signal = SIGCHLD;
  pid_t wanted = pid;
  if (pid > 0) {
    args.set_tid = reinterpret_cast<std::uintptr_t>(&wanted);
    args.set_tid_size = 1;
  }
  const long child = syscall(SYS_clone3, &args, sizeof args);
  if (child != 0) return static_cast<pid_t>(child);
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  for (std::uint8_t& byte : buffer) byte = fill;
  *static_cast<volatile std::uint64_t*>(seal_word) = seal;
  const char mark = 'r';
  if (write(ready, &mark, 1) != 1) _exit(1);
  for (;;) pause();
}

/// Kills and reaps a holder when the test ends, however it ends.
struct Reaper {
  pid_t pid = -1;
  ~Reaper() {
    if (pid > 0) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
  }
};

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

TEST_CASE("send seal: a read through a dead sender's pid, now another process's, fails",
          "[send_seal]") {
  // The sender announced its buffer, its seal word and the seal's value, and died; a new
  // process took its pid and holds other bytes, and another value, at the same addresses (both
  // are children of this process, so they share its layout). The read must not pass those
  // bytes off as the message.
  if (!can_read_self()) {
    WARN("process_vm_readv on this process is not allowed here");
    return;
  }
  constexpr std::size_t kBytes = 100000;
  constexpr std::uint64_t kSenderSeal = 0x5eed5eed5eed5eedULL, kOtherSeal = 0x0dd0dd0dd0dd0dd1ULL;
  std::vector<std::uint8_t> buffer(kBytes, 0);
  std::uint64_t seal_word = 0;
  const std::uint64_t seal_at = reinterpret_cast<std::uintptr_t>(&seal_word);
  int ready[2];
  REQUIRE(pipe(ready) == 0);
  char mark = 0;
  std::vector<std::uint8_t> sent(kBytes, 0xA1), into(kBytes, 0);

  Reaper sender;
  sender.pid = start_holder(0, buffer, 0xA1, &seal_word, kSenderSeal, ready[1]);
  REQUIRE(sender.pid > 0);
  REQUIRE(read(ready[0], &mark, 1) == 1);
  // While it lives, the read returns its bytes: the read below fails for the pid, nothing else.
  REQUIRE(read_sealed_process_memory(sender.pid, into.data(), buffer.data(), kBytes, seal_at,
                                     kSenderSeal, tail_of(sent)) == 0);
  REQUIRE(into == sent);
  const pid_t dead = sender.pid;
  kill(dead, SIGKILL);
  REQUIRE(waitpid(dead, nullptr, 0) == dead);
  sender.pid = -1;

  Reaper other;
  other.pid = start_holder(dead, buffer, 0xB2, &seal_word, kOtherSeal, ready[1]);
  if (other.pid < 0) {
    WARN("cannot start a process with a chosen pid here (clone3 set_tid: " << std::strerror(errno)
                                                                           << ")");
    close(ready[0]);
    close(ready[1]);
    return;
  }
  REQUIRE(other.pid == dead);
  REQUIRE(read(ready[0], &mark, 1) == 1);
  std::fill(into.begin(), into.end(), std::uint8_t{0});
  CHECK(read_sealed_process_memory(dead, into.data(), buffer.data(), kBytes, seal_at, kSenderSeal,
                                   tail_of(sent)) == ECANCELED);
  close(ready[0]);
  close(ready[1]);
}
