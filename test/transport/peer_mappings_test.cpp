// Mappable memory (core/mappable_memory.hpp) and its mapping by another process
// (transport/peer_mappings.hpp): a forked child allocates, the parent maps, over pipes that
// order every step.

#include "transport/peer_mappings.hpp"
#include "core/mappable_memory.hpp"

#include <cohort/buffer.hpp>
#include <cohort/error.hpp>

#include <catch2/catch.hpp>

#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

namespace {

using cohort::MappableRef;
using cohort::transport::PeerMappings;

constexpr std::size_t kBytes = 1 << 20;

unsigned char pattern(std::size_t i) {
  return static_cast<unsigned char>(i % 251 + 1);
}

/// One direction of a pipe carrying plain values.
struct Channel {
  int fds[2] = {-1, -1};
  Channel() { REQUIRE(pipe(fds) == 0); }
  ~Channel() {
    for (int fd : fds)
      if (fd >= 0) close(fd);
  }
  /// Closes end `i` (0 read, 1 write) in this process: each side keeps only the end it uses, so
  /// a side that dies leaves the other reading end-of-file instead of waiting forever.
  void close_end(int i) {
    close(fds[i]);
    fds[i] = -1;
  }
  template <class T>
  void put(const T& value) const {
    if (write(fds[1], &value, sizeof value) != static_cast<ssize_t>(sizeof value)) _exit(90);
  }
  template <class T>
  T get() const {
    T value{};
    if (read(fds[0], &value, sizeof value) != static_cast<ssize_t>(sizeof value)) _exit(91);
    return value;
  }
};

/// Whether the page at `p` is in memory (mincore), for a shared file mapping: whether the file
/// still has it.
bool resident(const void* p) {
  const long page = sysconf(_SC_PAGESIZE);
  auto* start = reinterpret_cast<void*>(reinterpret_cast<std::uintptr_t>(p) & ~(page - 1));
  unsigned char in = 0;
  REQUIRE(mincore(start, static_cast<std::size_t>(page), &in) == 0);
  return (in & 1) != 0;
}

}  // namespace

TEST_CASE("mappable memory is zeroed, and found only for ranges inside a live allocation") {
  std::size_t rounded = 0;
  auto* base = static_cast<unsigned char*>(cohort::allocate_mappable(10000, &rounded));
  REQUIRE(base != nullptr);
  const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  CHECK(rounded == (10000 + page - 1) / page * page);  // whole pages
  for (std::size_t i = 0; i < rounded; ++i) REQUIRE(base[i] == 0);
  MappableRef ref;
  REQUIRE(cohort::find_mappable(base + 100, 200, &ref));
  CHECK(ref.offset == 100);
  CHECK(ref.file_bytes == rounded);
  CHECK(ref.fd >= 0);
  CHECK(ref.inode != 0);
  CHECK(cohort::find_mappable(base, rounded, &ref));
  CHECK_FALSE(cohort::find_mappable(base + 1, rounded, &ref));  // one byte past the end
  CHECK_FALSE(cohort::find_mappable(base + rounded, 1, &ref));
  int elsewhere = 0;
  CHECK_FALSE(cohort::find_mappable(&elsewhere, sizeof elsewhere, &ref));
  cohort::free_mappable(base);
  CHECK_FALSE(cohort::find_mappable(base + 100, 200, &ref));

  errno = 0;
  CHECK(cohort::allocate_mappable(0, &rounded) == nullptr);
  CHECK(errno == EINVAL);

  auto* huge = cohort::allocate_mappable((2u << 20) + 1, &rounded);
  REQUIRE(huge != nullptr);
  CHECK(rounded == (4u << 20));  // whole 2 MiB pages from 2 MiB on
  CHECK(reinterpret_cast<std::uintptr_t>(huge) % page == 0);
  cohort::free_mappable(huge);
}

TEST_CASE("a forked child shares mappable memory, and letting it go leaves the parent's") {
  std::size_t rounded = 0;
  auto* base = static_cast<unsigned char*>(cohort::allocate_mappable(8192, &rounded));
  REQUIRE(base != nullptr);
  for (std::size_t i = 0; i < 8192; ++i) base[i] = pattern(i);
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    // The child's view is the parent's memory, not a copy: its write shows in the parent.
    base[0] = 0xCD;
    cohort::free_mappable(base);  // its own view only
    MappableRef ref;
    _exit(cohort::find_mappable(base, 1, &ref) ? 20 : 0);
  }
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(base[0] == 0xCD);
  for (std::size_t i = 1; i < 8192; ++i) REQUIRE(base[i] == pattern(i));
  MappableRef ref;
  CHECK(cohort::find_mappable(base, 8192, &ref));
  cohort::free_mappable(base);
}

TEST_CASE("Buffer::allocate_mappable gives mappable memory, freed with its last Buffer") {
  MappableRef ref;
  void* data = nullptr;
  {
    const cohort::Buffer buffer = cohort::Buffer::allocate_mappable(1000, cohort::DType::Float32);
    data = buffer.data();
    CHECK(buffer.count() == 1000);
    CHECK(buffer.device() == cohort::Device::cpu());
    REQUIRE(cohort::find_mappable(buffer.data(), 4000, &ref));
    CHECK(ref.offset == 0);
    for (std::size_t i = 0; i < 1000; ++i) REQUIRE(buffer.data_as<float>()[i] == 0.0f);
  }
  CHECK_FALSE(cohort::find_mappable(data, 4000, &ref));
  CHECK(cohort::Buffer::allocate_mappable(0, cohort::DType::Float32).data() == nullptr);
}

TEST_CASE("another process maps mappable memory in place, cached, and checked against its file") {
  Channel to_parent, to_child;
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    // The owner: allocates, fills, names the block, and answers the parent's requests.
    to_parent.close_end(0);
    to_child.close_end(1);
    std::size_t rounded = 0;
    auto* a = static_cast<unsigned char*>(cohort::allocate_mappable(kBytes, &rounded));
    if (a == nullptr) _exit(10);
    for (std::size_t i = 0; i < kBytes; ++i) a[i] = pattern(i);
    MappableRef ref;
    if (!cohort::find_mappable(a + 4096, 8192, &ref)) _exit(11);
    to_parent.put(ref);
    if (to_child.get<int>() != 1) _exit(12);  // the parent wrote through its mapping
    if (a[4096] != 0xAB || a[4097] != pattern(4097)) _exit(13);
    cohort::free_mappable(a);
    auto* b = static_cast<unsigned char*>(cohort::allocate_mappable(4096, &rounded));
    if (b == nullptr || !cohort::find_mappable(b, 4096, &ref)) _exit(14);
    b[0] = 7;
    to_parent.put(ref);
    // Enough more allocations to overflow the parent's cache within one op and then another,
    // each marked with its number.
    std::vector<void*> more;
    for (std::size_t i = 0; i < PeerMappings::kMaxMappings + 2; ++i) {
      more.push_back(cohort::allocate_mappable(4096, &rounded));
      if (more.back() == nullptr || !cohort::find_mappable(more.back(), 4096, &ref)) _exit(15);
      static_cast<unsigned char*>(more.back())[0] = static_cast<unsigned char>(i + 1);
      to_parent.put(ref);
    }
    if (to_child.get<int>() != 2) _exit(16);
    _exit(0);
  }

  to_parent.close_end(1);
  to_child.close_end(0);
  PeerMappings mappings;
  const auto ref = to_parent.get<MappableRef>();
  CHECK(ref.offset == 4096);
  std::byte* p = mappings.map(1, child, ref, 8192, 1, "test");
  for (std::size_t i = 0; i < 8192; ++i)
    REQUIRE(static_cast<unsigned char>(p[i]) == pattern(4096 + i));
  p[0] = std::byte{0xAB};
  CHECK(mappings.map(1, child, ref, 8192, 1, "test") == p);  // cached
  CHECK(mappings.size() == 1);

  MappableRef wrong = ref;
  wrong.inode += 1;
  CHECK_THROWS_MATCHES(mappings.map(1, child, wrong, 8192, 1, "test"), cohort::Error,
                       Catch::Matchers::Predicate<cohort::Error>([](const cohort::Error& e) {
                         return e.code() == cohort::ErrorCode::RemoteError &&
                                std::string(e.what()).find("not the memory it exposed") !=
                                    std::string::npos;
                       }));
  MappableRef closed = ref;
  closed.fd = 1000;   // no such descriptor in the child
  closed.inode += 2;  // and not cached under the inode the mapping was made for
  CHECK_THROWS_MATCHES(mappings.map(1, child, closed, 8192, 1, "test"), cohort::Error,
                       Catch::Matchers::Predicate<cohort::Error>([](const cohort::Error& e) {
                         return e.code() == cohort::ErrorCode::SystemError;
                       }));
  MappableRef past_end = ref;
  past_end.offset = kBytes - 4096;
  CHECK_THROWS_AS(mappings.map(1, child, past_end, 8192, 1, "test"), cohort::Error);
  CHECK(mappings.size() == 1);

  CHECK(resident(p));
  to_child.put(1);
  const auto b = to_parent.get<MappableRef>();
  // The child freed the first allocation: its pages left the file, though it is still mapped
  // here, and reading it finds zeros instead of faulting.
  CHECK_FALSE(resident(p));
  CHECK(static_cast<unsigned char>(p[0]) == 0);
  std::byte* q = mappings.map(1, child, b, 4096, 1, "test");
  CHECK(static_cast<unsigned char>(q[0]) == 7);
  CHECK(mappings.size() == 2);
  // One op maps 65 allocations: the two the first op used make room, then the cache grows
  // rather than unmap one this op still holds.
  std::vector<std::byte*> held;
  for (std::size_t i = 0; i <= PeerMappings::kMaxMappings; ++i)
    held.push_back(mappings.map(1, child, to_parent.get<MappableRef>(), 4096, 2, "test"));
  CHECK(mappings.size() == PeerMappings::kMaxMappings + 1);
  for (std::size_t i = 0; i < held.size(); ++i)
    REQUIRE(static_cast<unsigned char>(held[i][0]) == i + 1);
  // The next op trims the cache back to its size, least recently used first.
  mappings.map(1, child, to_parent.get<MappableRef>(), 4096, 3, "test");
  CHECK(mappings.size() == PeerMappings::kMaxMappings);
  CHECK(static_cast<unsigned char>(held.back()[0]) == PeerMappings::kMaxMappings + 1);
  to_child.put(2);
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}
