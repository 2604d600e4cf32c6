#include "core/mappable_memory.hpp"

#include "core/bulk_allocation.hpp"
#include "core/mappable_cache.hpp"
#include "core/tunables.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <new>
#include <optional>
#include <shared_mutex>

namespace cohort {
namespace {

struct MappableAllocation {
  std::size_t bytes;
  int fd;
  std::uint64_t inode;
  std::uint64_t device;
  pid_t owner;  ///< the process that allocated it (a forked child inherits the entry)
  /// When it was handed out (registry's `stamps`): one handed out before the last
  /// retire_live_mappable() is not kept for reuse.
  std::uint64_t stamp;
};

/// Live allocations by first byte. A process keeps few (they are large), so a map under one
/// lock is enough; `live` lets the common case, a process with none, skip the lock. Freed
/// allocations kept for reuse are in `cache`, under the same lock.
struct MappableRegistry {
  std::shared_mutex mutex;
  std::map<std::uintptr_t, MappableAllocation> allocations;
  std::atomic<std::size_t> live{0};
  MappableCache cache;
  std::atomic<std::uint64_t> stamps{0};
  /// Allocations stamped at or below this were live when an op over them failed.
  std::atomic<std::uint64_t> retired_through{0};
};

MappableRegistry& mappable_registry() {
  // Never destroyed: frees may run during static destruction. A fork holds the lock across it,
  // so the map is whole in the child; the child then starts from a fresh lock, since the one it
  // inherited is held by a thread that does not exist there (and glibc's rwlock will not let
  // another thread id unlock it).
  static MappableRegistry* r = [] {
    auto* registry = new MappableRegistry;
    // The parent also retires what is live: the child may go on using its views of those
    // allocations, so the parent must not hand one out again once it frees it. Before the
    // unlock (retiring takes no lock), so that no free slips in between.
    pthread_atfork([] { mappable_registry().mutex.lock(); },
                   [] {
                     retire_live_mappable();
                     mappable_registry().mutex.unlock();
                   },
                   [] { new (&mappable_registry().mutex) std::shared_mutex; });
    return registry;
  }();
  return *r;
}

std::size_t mappable_page_bytes() {
  static const auto bytes = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  return bytes;
}

/// How much freed memory to keep: the tunable, or none when the environment is malformed (init
/// reports that; a free must not throw).
std::size_t cache_limit() noexcept {
  try {
    return tunables().mappable_cache_bytes;
  } catch (...) {
    return 0;
  }
}

/// Lets go of blocks the cache handed back: the allocating process takes the pages out of the
/// file first (peers may still map it); a forked child only drops its own view.
void release(const MappableCache::Released& released) noexcept {
  const pid_t me = getpid();
  for (std::size_t i = 0; i < released.count; ++i) {
    const CachedMappable& block = released.blocks[i];
    if (block.owner == me)
      (void)fallocate(block.fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0,
                      static_cast<off_t>(block.bytes));
    munmap(block.base, block.bytes);
    close(block.fd);
  }
}

/// A kept allocation of `size` to `bytes` + a quarter for a new one, zeroed up to `bytes`, and
/// registered again; null when none fits.
void* reuse_cached(MappableRegistry& r, std::size_t bytes, std::size_t size,
                   std::size_t* rounded) noexcept {
  MappableCache::Released foreign;
  std::optional<CachedMappable> block;
  {
    std::unique_lock lock(r.mutex);
    block = r.cache.take(size, getpid(), foreign);
  }
  release(foreign);
  if (!block) return nullptr;
  // Zeroed, as a fresh file reads: a write over pages already in place, not a fault per page.
  std::memset(block->base, 0, bytes);
  try {
    std::unique_lock lock(r.mutex);
    r.allocations.emplace(reinterpret_cast<std::uintptr_t>(block->base),
                          MappableAllocation{block->bytes, block->fd, block->inode, block->device,
                                             block->owner, r.stamps.fetch_add(1) + 1});
  } catch (...) {
    MappableCache::Released lost;
    lost.add(*block);
    release(lost);
    return nullptr;  // the caller allocates afresh, or reports ENOMEM the same way
  }
  r.live.fetch_add(1, std::memory_order_relaxed);
  *rounded = block->bytes;
  return block->base;
}

/// The registry and its fork handlers exist from the library's load, before any thread could
/// fork while another builds them (a child would inherit the static's guard mid-construction).
[[maybe_unused]] const bool registry_at_load = (mappable_registry(), true);

/// A new memfd of `size` bytes, mapped and registered; null with errno set when the kernel
/// refuses.
void* allocate_fresh(MappableRegistry& r, std::size_t size, bool huge,
                     std::size_t* rounded) noexcept {
  const int fd = memfd_create("cohort-buffer", MFD_CLOEXEC);
  if (fd < 0) return nullptr;
  struct stat st {};
  if (ftruncate(fd, static_cast<off_t>(size)) != 0 || fstat(fd, &st) != 0) {
    const int err = errno;
    close(fd);
    errno = err;
    return nullptr;
  }
  void* base = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    const int err = errno;
    close(fd);
    errno = err;
    return nullptr;
  }
  // Advice only: shared memory gets huge pages where shmem_enabled allows advised ones.
  if (huge) (void)madvise(base, size, MADV_HUGEPAGE);
  try {
    std::unique_lock lock(r.mutex);
    r.allocations.emplace(reinterpret_cast<std::uintptr_t>(base),
                          MappableAllocation{size, fd, static_cast<std::uint64_t>(st.st_ino),
                                             static_cast<std::uint64_t>(st.st_dev), getpid(),
                                             r.stamps.fetch_add(1) + 1});
  } catch (...) {
    munmap(base, size);
    close(fd);
    errno = ENOMEM;
    return nullptr;
  }
  r.live.fetch_add(1, std::memory_order_relaxed);
  *rounded = size;
  return base;  // a fresh file reads as zeros
}

}  // namespace

void* allocate_mappable(std::size_t bytes, std::size_t* rounded) noexcept {
  const bool huge = bytes >= kHugePageBytes;
  const std::size_t unit = huge ? kHugePageBytes : mappable_page_bytes();
  if (bytes == 0 || bytes > SIZE_MAX - unit) {
    errno = EINVAL;
    return nullptr;
  }
  const std::size_t size = (bytes + unit - 1) / unit * unit;
  MappableRegistry& r = mappable_registry();
  if (void* reused = reuse_cached(r, bytes, size, rounded)) return reused;
  void* fresh = allocate_fresh(r, size, huge, rounded);
  // Kept allocations hold descriptors and memory: where the kernel refuses for want of either
  // (a memfd, its length or its mapping; pages are charged later, at first touch), give them
  // back and try again.
  if (fresh == nullptr && (errno == EMFILE || errno == ENFILE || errno == ENOMEM) &&
      cached_mappable_bytes() > 0) {
    release_cached_mappable();
    fresh = allocate_fresh(r, size, huge, rounded);
  }
  return fresh;
}

void free_mappable(void* base) noexcept {
  if (base == nullptr) return;
  MappableRegistry& r = mappable_registry();
  const std::size_t limit = cache_limit();
  MappableCache::Released released;
  {
    std::unique_lock lock(r.mutex);
    const auto it = r.allocations.find(reinterpret_cast<std::uintptr_t>(base));
    if (it == r.allocations.end()) return;
    const MappableAllocation a = it->second;
    r.allocations.erase(it);
    const CachedMappable block{base, a.bytes, a.fd, a.inode, a.device, a.owner};
    // Only the allocating process keeps it (a forked child's view is not its to reuse), and not
    // one that was live when an op failed: a peer may still be writing into it.
    if (a.owner == getpid() && a.stamp > r.retired_through.load(std::memory_order_relaxed)) {
      r.cache.keep(block, limit, released);
    } else {
      released.add(block);
    }
  }
  r.live.fetch_sub(1, std::memory_order_relaxed);
  release(released);
}

void retire_live_mappable() noexcept {
  MappableRegistry& r = mappable_registry();
  const std::uint64_t now = r.stamps.fetch_add(1) + 1;
  // Raised, never lowered: a plain store from a retire that took its stamp earlier could land
  // after a later one's and unretire allocations stamped between the two.
  std::uint64_t seen = r.retired_through.load(std::memory_order_relaxed);
  while (seen < now &&
         !r.retired_through.compare_exchange_weak(seen, now, std::memory_order_relaxed)) {
  }
}

std::size_t release_cached_mappable() noexcept {
  MappableRegistry& r = mappable_registry();
  MappableCache::Released released;
  std::size_t bytes = 0;
  {
    std::unique_lock lock(r.mutex);
    bytes = r.cache.bytes();
    r.cache.drain(released);
  }
  release(released);
  return bytes;
}

std::size_t cached_mappable_bytes() noexcept {
  MappableRegistry& r = mappable_registry();
  std::shared_lock lock(r.mutex);
  return r.cache.bytes();
}

bool find_mappable(const void* p, std::size_t bytes, MappableRef* ref) noexcept {
  MappableRegistry& r = mappable_registry();
  if (r.live.load(std::memory_order_relaxed) == 0 || p == nullptr) return false;
  const auto address = reinterpret_cast<std::uintptr_t>(p);
  std::shared_lock lock(r.mutex);
  auto it = r.allocations.upper_bound(address);
  if (it == r.allocations.begin()) return false;
  --it;
  const std::size_t offset = address - it->first;
  if (offset >= it->second.bytes || bytes > it->second.bytes - offset) return false;
  *ref = MappableRef{it->second.fd, it->second.inode, it->second.device, it->second.bytes, offset};
  return true;
}

}  // namespace cohort
