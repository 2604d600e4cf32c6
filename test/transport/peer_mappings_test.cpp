// Mappable memory (core/mappable_memory.hpp) and its mapping by another process
// (transport/peer_mappings.hpp): a forked child allocates, the parent maps, over pipes that
// order every step.

#include "transport/peer_mappings.hpp"
#include "core/mappable_memory.hpp"
#include "core/tunables.hpp"

#include <cohort/buffer.hpp>
#include <cohort/error.hpp>

#include "support/sanitizers.hpp"
#include "support/scoped_env.hpp"

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <string>
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

using cohort::test::kSanitized;

/// The address space this process maps now (/proc/self/statm's first field), 0 if unreadable.
std::size_t mapped_bytes() {
  std::ifstream statm("/proc/self/statm");
  std::size_t pages = 0;
  if (!(statm >> pages)) return 0;
  return pages * static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
}

/// Whether the page at `p` is in memory (mincore), for a shared file mapping: whether the file
/// still has it.
bool resident(const void* p) {
  const long page = sysconf(_SC_PAGESIZE);
  auto* start = reinterpret_cast<void*>(reinterpret_cast<std::uintptr_t>(p) & ~(page - 1));
  unsigned char in = 0;
  REQUIRE(mincore(start, static_cast<std::size_t>(page), &in) == 0);
  return (in & 1) != 0;
}

/// Forks the owner's side of a two-process case: each process keeps only the pipe ends it uses,
/// and the child reads the tunables with COHORT_MAPPABLE_CACHE_MIB set to `cache_mib` (null:
/// unset, the default). Returns what fork() did.
pid_t fork_owner(Channel& to_parent, Channel& to_child, const char* cache_mib) {
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    to_parent.close_end(0);
    to_child.close_end(1);
    if (cache_mib != nullptr) {
      setenv("COHORT_MAPPABLE_CACHE_MIB", cache_mib, 1);
    } else {
      unsetenv("COHORT_MAPPABLE_CACHE_MIB");
    }
    cohort::reload_tunables();
  } else {
    to_parent.close_end(1);
    to_child.close_end(0);
  }
  return child;
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
  // The owner keeps no freed allocation, so that a free punches the pages out (the kept case is
  // below).
  const pid_t child = fork_owner(to_parent, to_child, "0");
  if (child == 0) {
    // The owner: allocates, fills, names the block, and answers the parent's requests.
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

namespace {

/// COHORT_MAPPABLE_CACHE_MIB set (or unset) for one scope, the tunables read again on entry and
/// exit; what was kept is let go on both, so each test starts from an empty cache.
class CacheLimit {
 public:
  explicit CacheLimit(std::optional<std::string> mib) {
    env_.emplace("COHORT_MAPPABLE_CACHE_MIB", std::move(mib));
    cohort::reload_tunables();
    cohort::release_cached_mappable();
  }
  ~CacheLimit() {
    env_.reset();  // restored before the tunables are read again
    cohort::reload_tunables();
    cohort::release_cached_mappable();
  }
  CacheLimit(const CacheLimit&) = delete;
  CacheLimit& operator=(const CacheLimit&) = delete;

 private:
  std::optional<cohort::test::ScopedEnv> env_;
};

}  // namespace

TEST_CASE("a freed mappable allocation is kept, and a new one of about its size reuses it zeroed") {
  const CacheLimit limit(std::nullopt);  // the default, 1024 MiB
  std::size_t rounded = 0;
  auto* a = static_cast<unsigned char*>(cohort::allocate_mappable(kBytes, &rounded));
  REQUIRE(a != nullptr);
  for (std::size_t i = 0; i < kBytes; ++i) a[i] = pattern(i);
  MappableRef first;
  REQUIRE(cohort::find_mappable(a, kBytes, &first));
  cohort::free_mappable(a);
  CHECK(cohort::cached_mappable_bytes() == kBytes);
  MappableRef ref;
  CHECK_FALSE(cohort::find_mappable(a, 1, &ref));  // kept, but not live
  CHECK(resident(a));                              // its pages stay in the file

  // Half its size: not served by it (the new buffer would hold twice the memory it uses).
  auto* small = static_cast<unsigned char*>(cohort::allocate_mappable(kBytes / 2, &rounded));
  REQUIRE(small != nullptr);
  CHECK(small != a);
  cohort::free_mappable(small);

  // A little smaller (at least 4/5 of it): served by it, the requested bytes zeroed.
  const std::size_t asked = kBytes - 100000;
  auto* b = static_cast<unsigned char*>(cohort::allocate_mappable(asked, &rounded));
  REQUIRE(b == a);
  CHECK(rounded == kBytes);
  REQUIRE(cohort::find_mappable(b, asked, &ref));
  CHECK(ref.inode == first.inode);
  CHECK(ref.fd == first.fd);
  for (std::size_t i = 0; i < asked; ++i) REQUIRE(b[i] == 0);
  CHECK(cohort::cached_mappable_bytes() == kBytes / 2);  // `small`, kept in turn
  cohort::free_mappable(b);
}

TEST_CASE("a freed mappable allocation is not kept with a limit of 0, nor one live at a failure") {
  std::size_t rounded = 0;
  MappableRef first, again;
  SECTION("COHORT_MAPPABLE_CACHE_MIB=0") {
    const CacheLimit limit("0");
    auto* a = static_cast<unsigned char*>(cohort::allocate_mappable(kBytes, &rounded));
    REQUIRE(a != nullptr);
    a[0] = 1;
    REQUIRE(cohort::find_mappable(a, 1, &first));
    cohort::free_mappable(a);
    CHECK(cohort::cached_mappable_bytes() == 0);
    auto* b = cohort::allocate_mappable(kBytes, &rounded);
    REQUIRE(cohort::find_mappable(b, 1, &again));
    CHECK(again.inode != first.inode);
    cohort::free_mappable(b);
  }
  SECTION("retired: live when an op failed") {
    const CacheLimit limit(std::nullopt);
    auto* a = static_cast<unsigned char*>(cohort::allocate_mappable(kBytes, &rounded));
    auto* other = static_cast<unsigned char*>(cohort::allocate_mappable(kBytes, &rounded));
    REQUIRE(a != nullptr);
    REQUIRE(other != nullptr);
    REQUIRE(cohort::find_mappable(a, 1, &first));
    cohort::retire_live_mappable();
    cohort::free_mappable(a);
    CHECK(cohort::cached_mappable_bytes() == 0);
    cohort::free_mappable(other);
    CHECK(cohort::cached_mappable_bytes() == 0);
    // One allocated after the failure is kept as usual.
    auto* b = cohort::allocate_mappable(kBytes, &rounded);
    REQUIRE(cohort::find_mappable(b, 1, &again));
    CHECK(again.inode != first.inode);
    cohort::free_mappable(b);
    CHECK(cohort::cached_mappable_bytes() == kBytes);
  }
}

TEST_CASE("Buffer::release_kept_mappable lets every kept allocation go, and says how much") {
  const CacheLimit limit(std::nullopt);
  const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  CHECK(cohort::Buffer::kept_mappable_bytes() == 0);
  CHECK(cohort::Buffer::release_kept_mappable() == 0);
  MappableRef first;
  {
    const cohort::Buffer a = cohort::Buffer::allocate_mappable(1000, cohort::DType::Float32);
    const cohort::Buffer b = cohort::Buffer::allocate_mappable(3 * page, cohort::DType::UInt8);
    REQUIRE(cohort::find_mappable(a.data(), 1, &first));
  }
  // 4000 bytes take one page, the other three.
  CHECK(cohort::Buffer::kept_mappable_bytes() == 4 * page);
  const cohort::Buffer live = cohort::Buffer::allocate_mappable(10, cohort::DType::Float64);
  CHECK(cohort::Buffer::kept_mappable_bytes() == 3 * page);  // the one-page block served it
  MappableRef reused;
  REQUIRE(cohort::find_mappable(live.data(), 1, &reused));
  CHECK(reused.inode == first.inode);
  CHECK(cohort::Buffer::release_kept_mappable() == 3 * page);
  CHECK(cohort::Buffer::kept_mappable_bytes() == 0);
  MappableRef still;
  REQUIRE(cohort::find_mappable(live.data(), 1, &still));  // a live one is not touched
  CHECK(still.inode == first.inode);
  live.data_as<double>()[9] = 2.5;
  CHECK(live.data_as<double>()[9] == 2.5);
  // What was let go is gone: an allocation of its size gets a new file.
  const cohort::Buffer fresh = cohort::Buffer::allocate_mappable(3 * page, cohort::DType::UInt8);
  CHECK(cohort::Buffer::kept_mappable_bytes() == 0);
}

TEST_CASE("a forked child does not reuse an allocation its parent keeps") {
  const CacheLimit limit(std::nullopt);
  std::size_t rounded = 0;
  auto* a = static_cast<unsigned char*>(cohort::allocate_mappable(kBytes, &rounded));
  REQUIRE(a != nullptr);
  for (std::size_t i = 0; i < kBytes; ++i) a[i] = pattern(i);
  MappableRef kept;
  REQUIRE(cohort::find_mappable(a, 1, &kept));
  cohort::free_mappable(a);
  REQUIRE(cohort::cached_mappable_bytes() == kBytes);
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    std::size_t child_rounded = 0;
    auto* b = static_cast<unsigned char*>(cohort::allocate_mappable(kBytes, &child_rounded));
    MappableRef ref;
    if (b == nullptr || !cohort::find_mappable(b, 1, &ref)) _exit(10);
    if (ref.inode == kept.inode) _exit(11);  // the parent's memory handed out here
    b[0] = 0xEE;
    cohort::free_mappable(b);
    _exit(0);
  }
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  // The parent's kept block is whole (its pages still in the file, the child's write not in
  // it; read through the parent's mapping, which the cache keeps), and still served to it.
  CHECK(resident(a));
  for (std::size_t i = 0; i < kBytes; ++i) REQUIRE(a[i] == pattern(i));
  auto* again = static_cast<unsigned char*>(cohort::allocate_mappable(kBytes, &rounded));
  MappableRef ref;
  REQUIRE(cohort::find_mappable(again, 1, &ref));
  CHECK(ref.inode == kept.inode);
  cohort::free_mappable(again);
}

TEST_CASE("a peer's mapping of a kept allocation stays valid when its owner reuses it") {
  Channel to_parent, to_child;
  const pid_t child = fork_owner(to_parent, to_child, nullptr);
  if (child == 0) {
    std::size_t rounded = 0;
    auto* a = static_cast<unsigned char*>(cohort::allocate_mappable(kBytes, &rounded));
    MappableRef ref;
    if (a == nullptr || !cohort::find_mappable(a, kBytes, &ref)) _exit(10);
    a[5] = 1;
    to_parent.put(ref);
    if (to_child.get<int>() != 1) _exit(12);  // the parent mapped it
    cohort::free_mappable(a);
    auto* b = static_cast<unsigned char*>(cohort::allocate_mappable(kBytes, &rounded));
    if (b != a || !cohort::find_mappable(b, kBytes, &ref)) _exit(13);
    b[5] = 2;
    to_parent.put(ref);
    if (to_child.get<int>() != 2) _exit(14);
    if (b[6] != 3) _exit(15);  // the parent's write through its old mapping
    _exit(0);
  }
  PeerMappings mappings;
  std::byte* p = mappings.map(1, child, to_parent.get<MappableRef>(), kBytes, 1, "test");
  CHECK(static_cast<unsigned char>(p[5]) == 1);
  to_child.put(1);
  std::byte* q = mappings.map(1, child, to_parent.get<MappableRef>(), kBytes, 2, "test");
  CHECK(q == p);  // the same file: the cached mapping serves
  CHECK(mappings.size() == 1);
  CHECK(static_cast<unsigned char>(q[5]) == 2);
  q[6] = std::byte{3};
  to_child.put(2);
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("out of descriptors, an allocation first lets the kept ones go") {
  const CacheLimit limit(std::nullopt);
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    // One kept allocation holds a descriptor; with the limit at the lowest free one, a new
    // memfd can only come from letting it go.
    std::size_t rounded = 0;
    void* kept = cohort::allocate_mappable(4096, &rounded);
    if (kept == nullptr) _exit(10);
    cohort::free_mappable(kept);
    if (cohort::cached_mappable_bytes() != 4096) _exit(11);
    const int lowest_free = open("/dev/null", O_RDONLY);
    if (lowest_free < 0) _exit(12);
    close(lowest_free);
    const rlimit nofile{static_cast<rlim_t>(lowest_free), static_cast<rlim_t>(lowest_free)};
    if (setrlimit(RLIMIT_NOFILE, &nofile) != 0) _exit(13);
    void* other = cohort::allocate_mappable(kBytes, &rounded);  // too large for the kept one
    if (other == nullptr) _exit(14);
    if (cohort::cached_mappable_bytes() != 0) _exit(15);
    _exit(0);
  }
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  INFO("10-13: set-up; 14: the allocation failed; 15: the kept one is still kept");
  CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("out of descriptors, mapping a peer's buffer first lets the kept ones go") {
  const CacheLimit limit(std::nullopt);
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    // This process plays both sides: a live allocation it maps through /proc as a peer's, and
    // a kept one holding a descriptor; with the limit at the lowest free one, the open can
    // only succeed by letting the kept one go.
    std::size_t rounded = 0;
    auto* live = static_cast<unsigned char*>(cohort::allocate_mappable(kBytes, &rounded));
    if (live == nullptr) _exit(10);
    for (std::size_t i = 0; i < kBytes; ++i) live[i] = pattern(i);
    MappableRef ref;
    if (!cohort::find_mappable(live, kBytes, &ref)) _exit(11);
    void* kept = cohort::allocate_mappable(4096, &rounded);
    if (kept == nullptr) _exit(12);
    cohort::free_mappable(kept);
    if (cohort::cached_mappable_bytes() != 4096) _exit(13);
    const int lowest_free = open("/dev/null", O_RDONLY);
    if (lowest_free < 0) _exit(14);
    close(lowest_free);
    const rlimit nofile{static_cast<rlim_t>(lowest_free), static_cast<rlim_t>(lowest_free)};
    if (setrlimit(RLIMIT_NOFILE, &nofile) != 0) _exit(15);
    PeerMappings mappings;
    try {
      const std::byte* seen = mappings.map(0, getpid(), ref, kBytes, 1, "test");
      if (seen == reinterpret_cast<std::byte*>(live)) _exit(16);  // must be a second mapping
      for (std::size_t i = 0; i < kBytes; ++i)
        if (static_cast<unsigned char>(seen[i]) != pattern(i)) _exit(17);
    } catch (const cohort::Error&) {
      _exit(18);
    }
    if (cohort::cached_mappable_bytes() != 0) _exit(19);
    _exit(0);
  }
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  INFO("10-15: set-up; 16-17: a wrong mapping; 18: mapping failed; 19: the kept one is still kept");
  CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("out of address space, mapping a peer's buffer first lets the kept ones go") {
  if (kSanitized) {
    WARN("not run under a sanitizer, which reserves and maps address space of its own");
    return;
  }
  const CacheLimit limit(std::nullopt);
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    // A kept allocation of 32 MiB holds its mapping; with the address-space limit a few MiB
    // above what the process maps now, an 8 MiB mapping fits only once it is let go.
    constexpr std::size_t kLive = std::size_t{8} << 20;
    constexpr std::size_t kKept = std::size_t{32} << 20;
    std::size_t rounded = 0;
    auto* live = static_cast<unsigned char*>(cohort::allocate_mappable(kLive, &rounded));
    if (live == nullptr) _exit(10);
    live[kLive - 1] = 0x5A;
    MappableRef ref;
    if (!cohort::find_mappable(live, kLive, &ref)) _exit(11);
    void* kept = cohort::allocate_mappable(kKept, &rounded);
    if (kept == nullptr) _exit(12);
    cohort::free_mappable(kept);
    if (cohort::cached_mappable_bytes() != kKept) _exit(13);
    PeerMappings mappings;
    const std::size_t mapped = mapped_bytes();
    if (mapped == 0) _exit(14);
    const rlimit as{static_cast<rlim_t>(mapped + (std::size_t{4} << 20)),
                    static_cast<rlim_t>(mapped + (std::size_t{4} << 20))};
    if (setrlimit(RLIMIT_AS, &as) != 0) _exit(15);
    try {
      const std::byte* seen = mappings.map(0, getpid(), ref, kLive, 1, "test");
      if (static_cast<unsigned char>(seen[kLive - 1]) != 0x5A) _exit(16);
    } catch (const cohort::Error&) {
      _exit(17);
    }
    if (cohort::cached_mappable_bytes() != 0) _exit(18);
    _exit(0);
  }
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  INFO("10-15: set-up; 16: a wrong mapping; 17: mapping failed; 18: the kept one is still kept");
  CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("an allocation live at a fork is not handed out again by the parent") {
  const CacheLimit limit(std::nullopt);
  std::size_t rounded = 0;
  auto* a = static_cast<unsigned char*>(cohort::allocate_mappable(kBytes, &rounded));
  REQUIRE(a != nullptr);
  MappableRef before;
  REQUIRE(cohort::find_mappable(a, 1, &before));
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) _exit(0);  // its view of `a` could outlive the parent's free
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  cohort::free_mappable(a);
  CHECK(cohort::cached_mappable_bytes() == 0);
  auto* b = cohort::allocate_mappable(kBytes, &rounded);
  MappableRef after;
  REQUIRE(cohort::find_mappable(b, 1, &after));
  CHECK(after.inode != before.inode);
  cohort::free_mappable(b);  // allocated after the fork: kept
  CHECK(cohort::cached_mappable_bytes() == kBytes);
}
