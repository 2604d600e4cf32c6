#include "transport/shared_arena.hpp"

#include <cohort/error.hpp>

#include "core/log.hpp"
#include "transport/host_identity.hpp"
#include "transport/tunables.hpp"

#include <fcntl.h>
#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace cohort::transport {

/// One cache-line pair per flag: adjacent-line prefetch pulls lines in 128-byte pairs, so a flag
/// sharing a pair with another rank's or another phase's flag would bounce with every store.
struct alignas(128) FlagLine {
  std::atomic<std::uint64_t> value{0};
  std::byte inline_data[SharedArena::kInlineBytes];
};
static_assert(offsetof(FlagLine, inline_data) + SharedArena::kInlineBytes <= 64,
              "a flag and its inline bytes must share one cache line");

/// Flags by [Flag][generation parity]: a line only ever holds generations of one parity, so a
/// piece's inline bytes stay put until every peer has moved two pieces on.
struct SharedArena::Control {
  FlagLine flags[2][2];
};

namespace {

constexpr std::size_t kPage = 4096;
static_assert(std::atomic<std::uint64_t>::is_always_lock_free,
              "flags shared between processes must be lock-free atomics");

std::size_t round_up(std::size_t n, std::size_t to) {
  return (n + to - 1) / to * to;
}

/// Per rank: control block, then data slots 0/1, then result slots 0/1.
std::size_t rank_stride() {
  return round_up(4 * sizeof(FlagLine), kPage) + 4 * SharedArena::kSlotBytes;
}

void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

Bytes to_bytes(const std::string& s) {
  return Bytes(s.begin(), s.end());
}
std::string to_string(const Bytes& b) {
  return std::string(b.begin(), b.end());
}

/// The segment as this rank mapped it; unmapped on scope exit unless released.
struct Mapping {
  void* base = MAP_FAILED;
  std::size_t bytes = 0;
  ~Mapping() {
    if (base != MAP_FAILED) munmap(base, bytes);
  }
  void* release() { return std::exchange(base, MAP_FAILED); }
};

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) close(fd);
  }
};

/// Rank 0's segment: an anonymous memfd, sized and mapped. Empty mapping (and a log line) when
/// the kernel refuses.
void create_segment(Mapping& mapping, Fd& fd) {
  fd.fd = memfd_create("cohort-arena", MFD_CLOEXEC);
  if (fd.fd < 0) {
    COHORT_LOG_DEBUG("shared arena: memfd_create failed (errno {})", errno);
    return;
  }
  if (ftruncate(fd.fd, static_cast<off_t>(mapping.bytes)) != 0) {
    COHORT_LOG_DEBUG("shared arena: sizing the segment to {} bytes failed (errno {})",
                     mapping.bytes, errno);
    return;
  }
  mapping.base = mmap(nullptr, mapping.bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd.fd, 0);
  if (mapping.base == MAP_FAILED)
    COHORT_LOG_DEBUG("shared arena: mapping {} bytes failed (errno {})", mapping.bytes, errno);
}

/// Another rank's view of rank 0's segment, through its open descriptor.
void map_segment(Mapping& mapping, const std::string& where) {
  Fd fd;
  fd.fd = open(where.c_str(), O_RDWR | O_CLOEXEC);
  if (fd.fd < 0) {
    COHORT_LOG_DEBUG("shared arena: opening {} failed (errno {})", where, errno);
    return;
  }
  mapping.base = mmap(nullptr, mapping.bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd.fd, 0);
  if (mapping.base == MAP_FAILED)
    COHORT_LOG_DEBUG("shared arena: mapping {} failed (errno {})", where, errno);
}

}  // namespace

std::unique_ptr<SharedArena> SharedArena::create(Store& store, const std::string& key_prefix,
                                                 int rank, int size, int local_world_size,
                                                 std::chrono::milliseconds timeout) {
  if (size < 2) return nullptr;
  const bool willing = read_transport_tunables().shared_memory;
  auto key = [&](const char* what, int r) {
    return key_prefix + "/arena/" + what + "/" + std::to_string(r);
  };

  // Round 1: who is where. Every rank reads the same n answers, so all reach the same verdict.
  const std::string identity = local_host_identity();
  store.set(key("host", rank), to_bytes((willing ? "1|" : "0|") + identity));
  bool usable = true;
  for (int r = 0; r < size; ++r) {
    const std::string answer = to_string(store.get(key("host", r), timeout));
    usable = usable && answer.size() > 2 && answer[0] == '1' && answer.substr(2) == identity;
  }
  if (!usable) {
    COHORT_LOG_DEBUG("shared arena: not every rank is willing and on this host; not used");
    return nullptr;
  }

  // Round 2: rank 0 creates the segment and says where it is; the others map it. Everyone
  // publishes its pid (for liveness checks) and whether it succeeded.
  Mapping mapping;
  mapping.bytes = rank_stride() * static_cast<std::size_t>(size);
  Fd segment;
  if (rank == 0) {
    create_segment(mapping, segment);
    const std::string where =
        mapping.base == MAP_FAILED
            ? std::string()
            : "/proc/" + std::to_string(getpid()) + "/fd/" + std::to_string(segment.fd);
    store.set(key("segment", 0), to_bytes(where));
  } else {
    const std::string where = to_string(store.get(key("segment", 0), timeout));
    if (!where.empty()) map_segment(mapping, where);
  }
  const bool mapped = mapping.base != MAP_FAILED;
  store.set(key("mapped", rank), to_bytes((mapped ? "1|" : "0|") + std::to_string(getpid())));
  std::vector<ProcessWatch> watches(static_cast<std::size_t>(size));
  bool everyone = true;
  for (int r = 0; r < size; ++r) {
    const std::string answer = to_string(store.get(key("mapped", r), timeout));
    everyone = everyone && answer.size() > 2 && answer[0] == '1';
    if (r != rank && answer.size() > 2)
      watches[static_cast<std::size_t>(r)] =
          ProcessWatch(static_cast<pid_t>(std::strtol(answer.c_str() + 2, nullptr, 10)));
  }
  if (!everyone) {
    COHORT_LOG_DEBUG("shared arena: some rank could not map the segment; not used");
    return nullptr;
  }
  // Rank 0's descriptor may close now: every rank holds a mapping, which keeps the memory.
  const WaitPolicy policy = choose_wait_policy(
      local_world_size, std::thread::hardware_concurrency(), read_transport_tunables().spin);
  const std::size_t bytes = mapping.bytes;
  void* base = mapping.release();
  return std::unique_ptr<SharedArena>(
      new SharedArena(rank, size, base, bytes, rank_stride(), policy, std::move(watches)));
}

SharedArena::SharedArena(int rank, int size, void* base, std::size_t bytes,
                         std::size_t rank_stride, WaitPolicy policy,
                         std::vector<ProcessWatch> watches)
    : rank_(rank),
      size_(size),
      base_(base),
      bytes_(bytes),
      rank_stride_(rank_stride),
      policy_(policy),
      watches_(std::move(watches)) {}

SharedArena::~SharedArena() {
  if (munmap(base_, bytes_) != 0)
    COHORT_LOG_WARN("shared arena: unmapping {} bytes failed (errno {})", bytes_, errno);
}

std::byte* SharedArena::data(int r, std::uint64_t generation) const noexcept {
  return static_cast<std::byte*>(base_) + static_cast<std::size_t>(r) * rank_stride_ +
         round_up(sizeof(Control), kPage) + (generation & 1) * kSlotBytes;
}

std::byte* SharedArena::result(int r, std::uint64_t generation) const noexcept {
  return data(r, generation) + 2 * kSlotBytes;
}

std::byte* SharedArena::inline_data(int r, std::uint64_t generation) const noexcept {
  auto* control = reinterpret_cast<Control*>(static_cast<std::byte*>(base_) +
                                             static_cast<std::size_t>(r) * rank_stride_);
  return control->flags[static_cast<int>(Flag::Arrived)][generation & 1].inline_data;
}

std::atomic<std::uint64_t>& SharedArena::flag(int r, Flag which,
                                              std::uint64_t generation) const noexcept {
  auto* control = reinterpret_cast<Control*>(static_cast<std::byte*>(base_) +
                                             static_cast<std::size_t>(r) * rank_stride_);
  return control->flags[static_cast<int>(which)][generation & 1].value;
}

bool SharedArena::reached(int r, Flag which, std::uint64_t generation) const noexcept {
  return flag(r, which, generation).load(std::memory_order_acquire) >= generation;
}

void SharedArena::publish(Flag which, std::uint64_t generation) noexcept {
  flag(rank_, which, generation).store(generation, std::memory_order_release);
}

void SharedArena::wait_for(int r, Flag which, std::uint64_t generation, Deadline deadline,
                           const std::string& what) {
  if (reached(r, which, generation)) return;
  block_until(r, which, generation, deadline, what);
}

void SharedArena::wait_for_all(Flag which, std::uint64_t generation, Deadline deadline,
                               const std::string& what) {
  for (int r = 0; r < size_; ++r)
    if (r != rank_ && !reached(r, which, generation)) block_until(r, which, generation, deadline, what);
}

void SharedArena::block_until(int r, Flag which, std::uint64_t generation, Deadline deadline,
                              const std::string& what) {
  using Clock = std::chrono::steady_clock;
  // Three phases: busy-poll (a peer on its own core answers within a microsecond or two),
  // then yield (oversubscribed ranks hand the core to the peer we wait for), then sleep with
  // growing naps so a rank that waits for seconds costs no CPU, checking the peer is alive.
  constexpr auto kLongestNap = std::chrono::microseconds(1000);
  const auto start = Clock::now();
  const auto spin_until = start + policy_.spin;
  const auto yield_until = start + kYieldPhase;
  auto nap = std::chrono::microseconds(10);
  for (std::uint32_t polls = 1;; ++polls) {
    if (reached(r, which, generation)) return;
    if (polls % 64 != 0) {
      if (policy_.yield_while_spinning)
        sched_yield();
      else
        cpu_relax();
      continue;
    }
    const auto now = Clock::now();
    if (now >= deadline) {
      std::string late;
      for (int p = 0; p < size_; ++p)
        if (p != rank_ && !reached(p, which, generation))
          late += (late.empty() ? "" : ", ") + std::to_string(p);
      throw Error(ErrorCode::Timeout, what + ": deadline passed waiting in shared memory for rank" +
                                          (late.find(',') == std::string::npos ? " " : "s ") +
                                          late + " (piece " + std::to_string(generation) + ")");
    }
    if (now < spin_until) continue;
    if (now < yield_until) {
      sched_yield();
      continue;
    }
    const ProcessWatch& watch = watches_[static_cast<std::size_t>(r)];
    if (watch.watching() && !watch.alive())
      throw Error(ErrorCode::RemoteError,
                  what + ": rank " + std::to_string(r) +
                      " failed (its process exited) while this rank waited for it in shared memory");
    std::this_thread::sleep_for(std::min(nap, std::chrono::duration_cast<std::chrono::microseconds>(
                                                  deadline - now)));
    nap = std::min(nap * 2, kLongestNap);
  }
}

std::string SharedArena::description() const {
  return "shared memory (" + std::to_string(size_) + " ranks, " +
         std::to_string(kSlotBytes / 1024) + " KiB slots)";
}

}  // namespace cohort::transport
