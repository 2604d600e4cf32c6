#include "core/mappable_memory.hpp"

#include "core/bulk_allocation.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <map>
#include <mutex>
#include <new>
#include <shared_mutex>

namespace cohort {
namespace {

struct MappableAllocation {
  std::size_t bytes;
  int fd;
  std::uint64_t inode;
  std::uint64_t device;
  pid_t owner;  ///< the process that allocated it (a forked child inherits the entry)
};

/// Live allocations by first byte. A process keeps few (they are large), so a map under one
/// lock is enough; `live` lets the common case, a process with none, skip the lock.
struct MappableRegistry {
  std::shared_mutex mutex;
  std::map<std::uintptr_t, MappableAllocation> allocations;
  std::atomic<std::size_t> live{0};
};

MappableRegistry& mappable_registry() {
  // Never destroyed: frees may run during static destruction. A fork holds the lock across it,
  // so the map is whole in the child; the child then starts from a fresh lock, since the one it
  // inherited is held by a thread that does not exist there (and glibc's rwlock will not let
  // another thread id unlock it).
  static MappableRegistry* r = [] {
    auto* registry = new MappableRegistry;
    pthread_atfork([] { mappable_registry().mutex.lock(); },
                   [] { mappable_registry().mutex.unlock(); },
                   [] { new (&mappable_registry().mutex) std::shared_mutex; });
    return registry;
  }();
  return *r;
}

std::size_t mappable_page_bytes() {
  static const auto bytes = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  return bytes;
}

/// The registry and its fork handlers exist from the library's load, before any thread could
/// fork while another builds them (a child would inherit the static's guard mid-construction).
[[maybe_unused]] const bool registry_at_load = (mappable_registry(), true);

}  // namespace

void* allocate_mappable(std::size_t bytes, std::size_t* rounded) noexcept {
  const std::size_t unit = bytes >= kHugePageBytes ? kHugePageBytes : mappable_page_bytes();
  if (bytes == 0 || bytes > SIZE_MAX - unit) {
    errno = EINVAL;
    return nullptr;
  }
  const std::size_t size = (bytes + unit - 1) / unit * unit;
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
  if (unit == kHugePageBytes) (void)madvise(base, size, MADV_HUGEPAGE);
  MappableRegistry& r = mappable_registry();
  try {
    std::unique_lock lock(r.mutex);
    r.allocations.emplace(reinterpret_cast<std::uintptr_t>(base),
                          MappableAllocation{size, fd, static_cast<std::uint64_t>(st.st_ino),
                                             static_cast<std::uint64_t>(st.st_dev), getpid()});
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

void free_mappable(void* base) noexcept {
  if (base == nullptr) return;
  MappableRegistry& r = mappable_registry();
  MappableAllocation allocation{};
  {
    std::unique_lock lock(r.mutex);
    const auto it = r.allocations.find(reinterpret_cast<std::uintptr_t>(base));
    if (it == r.allocations.end()) return;
    allocation = it->second;
    r.allocations.erase(it);
  }
  r.live.fetch_sub(1, std::memory_order_relaxed);
  // Peers may still map the file (their caches keep mappings): take the pages out of it, so
  // the memory returns now, whoever maps what. Only the allocating process does: a forked child
  // letting go of its inherited view must not empty its parent's buffer.
  if (allocation.owner == getpid())
    (void)fallocate(allocation.fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0,
                    static_cast<off_t>(allocation.bytes));
  munmap(base, allocation.bytes);
  close(allocation.fd);
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
