#include "transport/peer_mappings.hpp"

#include <cohort/error.hpp>

#include "core/system_error.hpp"
#include "core/unique_fd.hpp"
#include "transport/shared_segment.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>

namespace cohort::transport {

PeerMappings::~PeerMappings() {
  for (const Mapping& m : mappings_) munmap(m.base, m.bytes);
}

std::byte* PeerMappings::map(int r, pid_t pid, const MappableRef& ref, std::size_t bytes,
                             std::uint64_t op, const std::string& what) {
  auto it = std::find_if(mappings_.begin(), mappings_.end(), [&](const Mapping& m) {
    return m.rank == r && m.inode == ref.inode && m.device == ref.device;
  });
  if (it == mappings_.end()) {
    Mapping fresh = open_mapping(r, pid, ref, op, what);
    while (mappings_.size() >= kMaxMappings && evict_one(op)) {
    }
    try {
      mappings_.push_back(fresh);
    } catch (...) {
      munmap(fresh.base, fresh.bytes);
      throw;
    }
    it = mappings_.end() - 1;
  }
  if (ref.offset > it->bytes || bytes > it->bytes - ref.offset)
    throw Error(ErrorCode::RemoteError,
                "rank " + std::to_string(r) + " names " + std::to_string(bytes) +
                    " bytes at offset " + std::to_string(ref.offset) + " of its mappable memory, " +
                    "which holds " + std::to_string(it->bytes),
                ErrorContext{.op = what, .peers = {r}});
  it->last_use = ++uses_;
  it->op = op;
  return it->base + ref.offset;
}

namespace {

/// Out of descriptors or of address space: what this process's own kept allocations (each holds
/// a descriptor, a mapping and pages) could give back.
bool out_of_resources(int error) {
  return error == EMFILE || error == ENFILE || error == ENOMEM;
}

}  // namespace

PeerMappings::Mapping PeerMappings::open_mapping(int r, pid_t pid, const MappableRef& ref,
                                                 std::uint64_t op, const std::string& what) {
  const std::string where = shared_segment::proc_path(pid, ref.fd);
  UniqueFd fd(open(where.c_str(), O_RDWR | O_CLOEXEC));
  if (!fd && out_of_resources(errno)) {
    // This process's kept allocations hold descriptors for its own reuse; a peer's buffer
    // that cannot be opened for want of one comes first.
    release_cached_mappable();
    fd = UniqueFd(open(where.c_str(), O_RDWR | O_CLOEXEC));
  }
  if (!fd)
    throw system_error(what + ": opening rank " + std::to_string(r) + "'s buffer at " + where,
                       errno)
        .with_context(ErrorContext{.peers = {r}});
  struct stat st {};
  if (fstat(fd.get(), &st) != 0)
    throw system_error(what + ": examining rank " + std::to_string(r) + "'s buffer at " + where,
                       errno)
        .with_context(ErrorContext{.peers = {r}});
  // The descriptor number may have been reused if the owner freed the buffer mid-op.
  if (static_cast<std::uint64_t>(st.st_ino) != ref.inode ||
      static_cast<std::uint64_t>(st.st_dev) != ref.device ||
      static_cast<std::uint64_t>(st.st_size) < ref.file_bytes)
    throw Error(ErrorCode::RemoteError,
                "rank " + std::to_string(r) + "'s buffer at " + where +
                    " is not the memory it exposed (was it freed during the op?)",
                ErrorContext{.op = what, .peers = {r}});
  void* base = mmap(nullptr, ref.file_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  if (base == MAP_FAILED && out_of_resources(errno)) {
    // Out of address space or mappings (vm.max_map_count): let go of what is kept and of the
    // mappings no op holds now, then try once more.
    release_cached_mappable();
    while (evict_one(op)) {
    }
    base = mmap(nullptr, ref.file_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  }
  if (base == MAP_FAILED)
    throw system_error(what + ": mapping " + std::to_string(ref.file_bytes) + " bytes of rank " +
                           std::to_string(r) + "'s buffer",
                       errno)
        .with_context(ErrorContext{.peers = {r}});
  return Mapping{r,
                 ref.inode,
                 ref.device,
                 static_cast<std::byte*>(base),
                 static_cast<std::size_t>(ref.file_bytes),
                 0,
                 0};
}

bool PeerMappings::evict_one(std::uint64_t op) noexcept {
  auto oldest = mappings_.end();
  for (auto it = mappings_.begin(); it != mappings_.end(); ++it)
    if (it->op != op && (oldest == mappings_.end() || it->last_use < oldest->last_use)) oldest = it;
  if (oldest == mappings_.end()) return false;
  munmap(oldest->base, oldest->bytes);
  mappings_.erase(oldest);
  return true;
}

}  // namespace cohort::transport
