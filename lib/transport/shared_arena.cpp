#include "transport/shared_arena.hpp"

#include <cohort/error.hpp>

#include "core/check.hpp"
#include "core/log.hpp"
#include "core/memory_fence.hpp"
#include "core/tunables.hpp"
#include "transport/host_identity.hpp"
#include "transport/kept_exchange.hpp"
#include "transport/process_memory.hpp"
#include "transport/shared_segment.hpp"

#include <fmt/format.h>

#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <thread>
#include <utility>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace cohort::transport {

/// One cache-line pair per flag: adjacent-line prefetch pulls lines in 128-byte pairs, so a flag
/// sharing a pair with another rank's or another phase's flag would bounce with every store.
struct alignas(128) FlagLine {
  std::atomic<std::uint64_t> value{0};
  std::byte inline_data[SharedArena::kInlineBytes];
  /// The publishing op's announcement (begin_op), written before `value`. In the pair's second
  /// line, which the adjacent-line prefetch brings along with the first.
  alignas(64) std::atomic<std::uint64_t> announcement{0};
  /// The generation `announcement` belongs to; 0 while it is being rewritten (a seqlock: a
  /// reader that sees the same generation before and after reading the announcement read that
  /// generation's, not a half-replaced later one).
  std::atomic<std::uint64_t> announced_for{0};
  /// With value kDisagreed: the first generation of the op the rank failed in. Generations
  /// before it the rank had passed, and `announcement` still holds what it announced for the
  /// last of them on this line, so a peer still finishing one is judged by that.
  std::atomic<std::uint64_t> disagreed_from{0};
  /// With value kDisagreed: the announcement of the op the rank failed in.
  std::atomic<std::uint64_t> disagreed_announcement{0};
  /// Eager lines only: the generation of the op that wrote this eager piece, written before
  /// `value`. With a matching announcement it shows a reader that the writer ran the same op at
  /// the same place, without reading the writer's Arrived line (wait_for_eager).
  std::atomic<std::uint64_t> op_generation{0};
};
static_assert(sizeof(FlagLine) == 128, "a flag line pair is two cache lines");
static_assert(offsetof(FlagLine, inline_data) + SharedArena::kInlineBytes <= 64,
              "a flag and its inline bytes must share one cache line");

/// Flags by [Flag][generation parity]: a line only ever holds generations of one parity, so a
/// piece's inline bytes stay put until every peer has moved two pieces on. Then the eager lines
/// (by eager generation % kEagerDepth) and the Consumed flag.
struct SharedArena::Control {
  FlagLine flags[2][2];
  FlagLine eager[SharedArena::kEagerDepth];
  FlagLine consumed;
  /// Eager payloads over kInlineBytes, by eager generation % kEagerAreaDepth (read only after
  /// the line's flag). Page-aligned, so each area is one page (rank strides are whole pages).
  alignas(4096) std::byte eager_area[SharedArena::kEagerAreaDepth][SharedArena::kEagerBytes];
};

namespace {

constexpr std::size_t kPage = 4096;
static_assert(std::atomic<std::uint64_t>::is_always_lock_free,
              "flags shared between processes must be lock-free atomics");

std::size_t round_up(std::size_t n, std::size_t to) {
  return (n + to - 1) / to * to;
}

/// Per rank: control block, then data slots 0/1, then result slots 0/1.
template <class Control>
std::size_t rank_stride() {
  return round_up(sizeof(Control), kPage) + 4 * SharedArena::kSlotBytes;
}

void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
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

/// Rank 0's segment (shared_segment.hpp), sized and mapped. Empty mapping when that fails.
void create_segment(Mapping& mapping, Fd& fd) {
  fd.fd = shared_segment::create("cohort-arena", "shared arena");
  if (fd.fd < 0) return;
  if (void* base = shared_segment::size_and_map(fd.fd, mapping.bytes, "shared arena"))
    mapping.base = base;
}

/// Another rank's view of rank 0's segment, through its open descriptor.
void map_segment(Mapping& mapping, const std::string& where) {
  if (void* base = shared_segment::map_existing(where, mapping.bytes, "shared arena"))
    mapping.base = base;
}

}  // namespace

namespace {

// The set-up exchange: fixed-size records, so every receive knows its size.
struct HostReport {
  std::uint8_t willing = 0;
  char identity[255] = {};
};
struct Verdict {
  std::uint8_t usable = 0;
  char where[63] = {};  // "/proc/<pid>/fd/<fd>" of rank 0's segment; empty if it has none
};
struct MapReport {
  std::int64_t mapped = 0;
  std::int64_t pid = 0;
  /// The single-copy probe: a random value in this rank's private memory, and its address.
  std::uint64_t probe = 0;
  std::uint64_t probe_at = 0;
};

/// Runs a set-up round (kept_exchange.hpp), its failure named as the arena's set-up.
template <class Post>
void setup_round(Transport& transport, Tag tag, std::shared_ptr<void> keep, Post&& post,
                 Deadline deadline, const std::string& what) {
  try {
    exchange_keeping(transport, tag, std::move(keep), std::forward<Post>(post), deadline, what);
  } catch (const Error& e) {
    throw Error(e.code(), "setting up the shared arena: " + e.detail(), e.context());
  }
}

/// Rank 0 receives one `T` from every other rank (into `all[r]`); the others send theirs.
template <class T>
void gather_to_first(Transport& transport, std::vector<T>& all, const T& mine, Tag tag,
                     Deadline deadline, const std::string& what) {
  const bool first = transport.rank() == 0;
  auto memory =
      std::make_shared<std::vector<T>>(first ? static_cast<std::size_t>(transport.size()) : 1);
  (*memory)[0] = mine;
  setup_round(
      transport, tag, memory,
      [&](std::vector<Request>& requests) {
        if (!first) {
          requests.push_back(transport.post_send(0, memory->data(), sizeof(T), tag));
          return;
        }
        for (int r = 1; r < transport.size(); ++r)
          requests.push_back(
              transport.post_recv(r, &(*memory)[static_cast<std::size_t>(r)], sizeof(T), tag));
      },
      deadline, what);
  if (first) all = *memory;
}

/// Rank 0 sends `bytes` at `data` to every other rank; the others receive them there.
void send_from_first(Transport& transport, void* data, std::size_t bytes, Tag tag,
                     Deadline deadline, const std::string& what) {
  const bool first = transport.rank() == 0;
  auto memory = std::make_shared<std::vector<std::byte>>(bytes);
  if (first && bytes != 0) std::memcpy(memory->data(), data, bytes);
  setup_round(
      transport, tag, memory,
      [&](std::vector<Request>& requests) {
        if (first) {
          for (int r = 1; r < transport.size(); ++r)
            requests.push_back(transport.post_send(r, memory->data(), bytes, tag));
        } else {
          requests.push_back(transport.post_recv(0, memory->data(), bytes, tag));
        }
      },
      deadline, what);
  if (!first && bytes != 0) std::memcpy(data, memory->data(), bytes);
}

/// Whether this rank can copy straight out of every peer's memory (process_vm_readv, which the
/// kernel allows only where ptrace would be: same user, no Yama or seccomp rule against it), and
/// each peer's pid names that peer (not so across pid namespaces): reads every peer's probe, a
/// random value in its private memory, through its pid, and compares it with the value the peer
/// sent.
bool can_read_peers(std::span<const MapReport> reports, int rank) {
  for (std::size_t r = 0; r < reports.size(); ++r) {
    if (static_cast<int>(r) == rank) continue;
    const auto pid = static_cast<pid_t>(reports[r].pid);
    const int failure =
        pid == getpid() ? -1 : check_probe(pid, reports[r].probe_at, reports[r].probe);
    if (failure != 0) {
      COHORT_LOG_INFO(
          "shared arena: cannot read rank {}'s memory directly ({}); this host's collectives "
          "copy through the arena (COHORT_SINGLE_COPY)",
          r, failure > 0 ? std::strerror(failure) : "its pid names another process");
      return false;
    }
  }
  return true;
}

/// The tag of set-up round `round` (0 .. kSetupSteps - 1): the caller's step
/// `first_step + round`.
Tag round_tag(Tag first, int round) {
  return first + (static_cast<Tag>(round) << kSourceBits);
}

}  // namespace

std::unique_ptr<SharedArena> SharedArena::create(Transport& transport, Tag first_tag,
                                                 int local_world_size, Deadline deadline,
                                                 const std::string& what) {
  const int rank = transport.rank();
  const int size = transport.size();
  if (size < 2) return nullptr;

  // Round 1: who is where. Rank 0 decides for everyone.
  HostReport mine;
  mine.willing = tunables().shared_memory ? 1 : 0;
  const std::string identity = local_host_identity();
  std::memcpy(mine.identity, identity.data(), std::min(identity.size(), sizeof mine.identity - 1));
  std::vector<HostReport> hosts;
  gather_to_first(transport, hosts, mine, round_tag(first_tag, 0), deadline, what);

  // Round 2: rank 0 creates the segment if everyone is willing and on its host, and tells
  // everyone where it is (or that there is none).
  Mapping mapping;
  mapping.bytes = rank_stride<Control>() * static_cast<std::size_t>(size);
  Fd segment;
  Verdict verdict;
  if (rank == 0) {
    bool usable = true;
    for (const HostReport& host : hosts)
      usable = usable && host.willing &&
               std::strncmp(host.identity, mine.identity, sizeof mine.identity) == 0;
    if (usable) create_segment(mapping, segment);
    if (mapping.base != MAP_FAILED) {
      verdict.usable = 1;
      const std::string where = shared_segment::proc_path(getpid(), segment.fd);
      std::memcpy(verdict.where, where.data(), std::min(where.size(), sizeof verdict.where - 1));
    } else if (!usable) {
      COHORT_LOG_DEBUG("shared arena: not every rank is willing and on this host; not used");
    }
  }
  send_from_first(transport, &verdict, sizeof verdict, round_tag(first_tag, 1), deadline, what);
  if (!verdict.usable) return nullptr;

  // Round 3: the others map it; everyone's success, pid (for liveness checks) and single-copy
  // probe go to rank 0, which keeps its descriptor open until then. The probe stays here until
  // round 6, which no rank leaves before every rank has read it in round 5.
  if (rank != 0) map_segment(mapping, verdict.where);
  const std::uint64_t probe = random_probe();
  const MapReport report{mapping.base != MAP_FAILED ? 1 : 0, static_cast<std::int64_t>(getpid()),
                         probe, reinterpret_cast<std::uintptr_t>(&probe)};
  std::vector<MapReport> reports;
  gather_to_first(transport, reports, report, round_tag(first_tag, 2), deadline, what);

  // Round 4: rank 0 tells everyone whether every rank mapped it (in a leading record's
  // `mapped`), and every rank's report.
  if (rank == 0) {
    MapReport verdict_of_all{1, 0, 0, 0};
    for (const MapReport& r : reports) verdict_of_all.mapped = verdict_of_all.mapped && r.mapped;
    reports.insert(reports.begin(), verdict_of_all);
  } else {
    reports.resize(static_cast<std::size_t>(size) + 1);
  }
  send_from_first(transport, reports.data(), reports.size() * sizeof(MapReport),
                  round_tag(first_tag, 3), deadline, what);
  if (!reports[0].mapped) {
    COHORT_LOG_DEBUG("shared arena: some rank could not map the segment; not used");
    return nullptr;
  }
  reports.erase(reports.begin());
  std::vector<ProcessWatch> watches(static_cast<std::size_t>(size));
  for (int r = 0; r < size; ++r)
    if (r != rank)
      watches[static_cast<std::size_t>(r)] =
          ProcessWatch(static_cast<pid_t>(reports[static_cast<std::size_t>(r)].pid));

  // Rounds 5 and 6: single copy only if every rank can read every other rank's memory, and
  // the measured choice between it and the arena only if every rank allows it too.
  constexpr std::uint8_t kReadable = 1;
  constexpr std::uint8_t kMeasures = 2;
  std::uint8_t abilities = static_cast<std::uint8_t>(
      (tunables().single_copy && can_read_peers(reports, rank) ? kReadable : 0) |
      (tunables().measured_choice ? kMeasures : 0));
  std::vector<std::uint8_t> everyone;
  gather_to_first(transport, everyone, abilities, round_tag(first_tag, 4), deadline, what);
  if (rank == 0)
    for (std::uint8_t v : everyone) abilities &= v;
  send_from_first(transport, &abilities, sizeof abilities, round_tag(first_tag, 5), deadline, what);
  const bool readable = (abilities & kReadable) != 0;
  if (!readable)
    COHORT_LOG_DEBUG("shared arena: some rank cannot read its peers' memory; no single copy");

  const WaitPolicy policy =
      choose_wait_policy(local_world_size, transport.host_cpus(), tunables().spin);
  // The arena owns the mapping only once it exists: a failed allocation leaves it to `mapping`.
  auto arena = std::unique_ptr<SharedArena>(
      new SharedArena(rank, size, mapping.base, mapping.bytes, rank_stride<Control>(), policy,
                      std::move(watches), readable, readable && (abilities & kMeasures) != 0));
  mapping.release();
  return arena;
}

SharedArena::SharedArena(int rank, int size, void* base, std::size_t bytes, std::size_t rank_stride,
                         WaitPolicy policy, std::vector<ProcessWatch> watches, bool single_copy,
                         bool measured_choice)
    : rank_(rank),
      size_(size),
      base_(base),
      bytes_(bytes),
      rank_stride_(rank_stride),
      policy_(policy),
      watches_(std::move(watches)),
      single_copy_(single_copy),
      measured_choice_(measured_choice) {}

std::byte* SharedArena::map_peer(int r, const MappableRef& ref, std::size_t bytes, std::uint64_t op,
                                 const std::string& what) {
  COHORT_CHECK(single_copy_ && r != rank_);
  return mappings_.map(r, watches_[static_cast<std::size_t>(r)].pid(), ref, bytes, op, what);
}

void SharedArena::read_from(int r, void* into, const void* source, std::size_t bytes,
                            const std::string& what) const {
  const ProcessWatch& owner = watches_[static_cast<std::size_t>(r)];
  const int error = read_process_memory(owner.pid(), into, source, bytes);
  // Not asked after a copy that succeeded: a pidfd poll costs about 0.3 us, 4% of a 64 KiB
  // broadcast. (An owner killed before it marked its flags, whose pid another process of this
  // user took with the same address mapped, would be read as data; a seal read in the same
  // call, as the fastbox rendezvous does, would close that without a syscall.)
  if (error == 0) return;
  // A failure names the owner's death when the pidfd says so: a stranger that took its pid
  // answers EFAULT, not ESRCH.
  if (error == ESRCH || !owner.alive())
    throw Error(ErrorCode::RemoteError,
                "rank " + std::to_string(r) +
                    " failed (its process exited) while this rank copied from its memory",
                ErrorContext{.op = what, .peers = {r}});
  throw Error(ErrorCode::SystemError,
              "copying " + std::to_string(bytes) + " bytes at " + fmt::format("{}", source) +
                  " from rank " + std::to_string(r) + "'s memory failed: " + std::strerror(error),
              ErrorContext{.op = what, .peers = {r}});
}

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

std::byte* SharedArena::eager_data(int r, std::uint64_t eager, std::size_t bytes) const noexcept {
  auto* control = reinterpret_cast<Control*>(static_cast<std::byte*>(base_) +
                                             static_cast<std::size_t>(r) * rank_stride_);
  if (bytes <= kInlineBytes) return control->eager[eager % kEagerDepth].inline_data;
  return control->eager_area[eager % kEagerAreaDepth];
}

std::atomic<std::uint64_t>& SharedArena::flag(int r, Flag which,
                                              std::uint64_t generation) const noexcept {
  auto* control = reinterpret_cast<Control*>(static_cast<std::byte*>(base_) +
                                             static_cast<std::size_t>(r) * rank_stride_);
  switch (which) {
    case Flag::Eager: return control->eager[generation % kEagerDepth].value;
    case Flag::Consumed: return control->consumed.value;
    case Flag::Arrived:
    case Flag::Reduced: break;
  }
  return control->flags[static_cast<int>(which)][generation & 1].value;
}

namespace {
/// A flag value no generation reaches: the rank found that the ranks disagree about an op.
constexpr std::uint64_t kDisagreed = UINT64_MAX;

FlagLine& line_of(std::atomic<std::uint64_t>& value) {
  return *reinterpret_cast<FlagLine*>(&value);  // value is FlagLine's first member
}

/// Only the owning rank writes its lines, one store sequence at a time.
void write_announcement(FlagLine& line, std::uint64_t announcement, std::uint64_t generation) {
  line.announced_for.store(0, std::memory_order_relaxed);
  // Release: a reader that sees the new announcement also sees announced_for leave `generation`.
  line.announcement.store(announcement, std::memory_order_release);
  line.announced_for.store(generation, std::memory_order_release);
}

/// The announcement `line` holds for `generation`, or nullopt when it holds (or is becoming)
/// another generation's.
std::optional<std::uint64_t> read_announcement(const FlagLine& line, std::uint64_t generation) {
  const std::uint64_t before = line.announced_for.load(std::memory_order_acquire);
  const std::uint64_t announcement = line.announcement.load(std::memory_order_acquire);
  const std::uint64_t after = line.announced_for.load(std::memory_order_relaxed);
  if (before != generation || after != generation) return std::nullopt;
  return announcement;
}
}  // namespace

bool SharedArena::reached(int r, Flag which, std::uint64_t generation) const noexcept {
  return flag(r, which, generation).load(std::memory_order_acquire) >= generation;
}

void SharedArena::publish(Flag which, std::uint64_t generation) noexcept {
  std::atomic<std::uint64_t>& value = flag(rank_, which, generation);
  write_announcement(line_of(value), announcement_, generation);
  value.store(generation, std::memory_order_release);
}

void SharedArena::publish_eager(const EagerStep& step) noexcept {
  std::atomic<std::uint64_t>& value = flag(rank_, Flag::Eager, step.eager);
  write_announcement(line_of(value), announcement_, step.eager);
  line_of(value).op_generation.store(step.generation, std::memory_order_relaxed);
  value.store(step.eager, std::memory_order_release);
}

void SharedArena::note_consumed_by_all(std::uint64_t reached) noexcept {
  std::uint64_t least = UINT64_MAX;
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    const std::uint64_t seen = flag(r, Flag::Consumed, 0).load(std::memory_order_acquire);
    least = std::min(least, seen == kDisagreed ? reached : seen);
  }
  consumed_by_all_ = least;  // an arena has 2 ranks or more; least >= reached > the old value
}

void SharedArena::check_announcement(int r, Flag which, std::uint64_t generation,
                                     const std::string& what) {
  if (generation < op_first(which)) return;  // a previous op's piece
  std::atomic<std::uint64_t>& value = flag(r, which, generation);
  const std::uint64_t seen = value.load(std::memory_order_acquire);
  // A peer already further on (value > generation) overwrote this line with a later piece of
  // the same op or the next one; only an exact match or the disagreement mark is evidence.
  if (seen != generation && seen != kDisagreed) return;
  FlagLine& line = line_of(value);
  std::uint64_t theirs = 0;
  bool peer_failed = false;
  if (seen != kDisagreed) {
    const std::optional<std::uint64_t> read = read_announcement(line, seen);
    if (!read) return;  // the peer is rewriting the line for a later piece: not evidence either
    if (*read == announcement_) return;
    theirs = *read;
  } else if (generation < line.disagreed_from.load(std::memory_order_relaxed)) {
    // The peer passed this piece before the op it failed in, perhaps in another op than ours
    // (a third rank found the disagreement first): judge it by what it announced for this
    // piece, which the mark left in place. If the line has since held a later piece, that
    // says nothing about this one.
    const std::optional<std::uint64_t> read = read_announcement(line, generation);
    if (!read || *read == announcement_) return;
    theirs = *read;
  } else {
    theirs = line.disagreed_announcement.load(std::memory_order_relaxed);
    peer_failed = true;
  }
  mark_disagreed(theirs == kFailedOp ? kFailedOp : announcement_);
  if (theirs == kFailedOp)
    throw Error(ErrorCode::RemoteError,
                "rank " + std::to_string(r) +
                    " failed in a collective through this communicator's shared memory (its own "
                    "error says why)",
                ErrorContext{.op = what, .peers = {r}});
  const std::string detail =
      peer_failed
          ? "rank " + std::to_string(r) +
                " found that the ranks disagree about this op (it called " + describe_call(theirs) +
                "; rank " + std::to_string(rank_) + " called " + describe_call(announcement_) + ")"
          : "ranks disagree: rank " + std::to_string(r) + " called " + describe_call(theirs) +
                ", rank " + std::to_string(rank_) + " called " + describe_call(announcement_);
  throw Error(ErrorCode::InvalidArgument, detail, ErrorContext{.op = what, .peers = {r}});
}

std::string SharedArena::describe_call(std::uint64_t announcement) const {
  return describe_ != nullptr ? describe_(announcement) : std::to_string(announcement);
}

void SharedArena::mark_disagreed(std::uint64_t why) noexcept {
  if (std::exchange(marked_, true)) return;  // the first mark says what happened
  // The line's announcement stays: it is what this rank announced for the last piece it passed
  // there, which peers still finishing that piece compare with theirs (check_announcement).
  const auto mark = [why](std::atomic<std::uint64_t>& value, std::uint64_t first) {
    line_of(value).disagreed_announcement.store(why, std::memory_order_relaxed);
    line_of(value).disagreed_from.store(first, std::memory_order_relaxed);
    value.store(kDisagreed, std::memory_order_release);
  };
  for (const Flag which : {Flag::Arrived, Flag::Reduced})
    for (std::uint64_t parity = 0; parity < 2; ++parity)
      mark(flag(rank_, which, parity), op_first_generation_);
  for (std::uint64_t line = 0; line < kEagerDepth; ++line)
    mark(flag(rank_, Flag::Eager, line), op_first_eager_);
  mark(flag(rank_, Flag::Consumed, 0), op_first_eager_);
  // A peer that sees a mark must also see everything this rank did before it, and the mark must
  // be out before this rank's caller touches a buffer a single-copy reader may still be copying
  // (that reader looks at the mark after its copy).
  memory_fence(std::memory_order_seq_cst);
}

void SharedArena::wait_for(int r, Flag which, std::uint64_t generation, Deadline deadline,
                           const std::string& what) {
  if (!reached(r, which, generation)) block_until(r, which, generation, deadline, what);
  check_announcement(r, which, generation, what);
}

std::uint64_t SharedArena::wait_for_one_of(int r, std::uint64_t generation,
                                           std::span<const std::uint64_t> accepted,
                                           Deadline deadline, const std::string& what) {
  if (!reached(r, Flag::Arrived, generation))
    block_until(r, Flag::Arrived, generation, deadline, what);
  std::atomic<std::uint64_t>& value = flag(r, Flag::Arrived, generation);
  if (value.load(std::memory_order_acquire) == generation) {
    const std::optional<std::uint64_t> read = read_announcement(line_of(value), generation);
    if (read && std::find(accepted.begin(), accepted.end(), *read) != accepted.end()) return *read;
  }
  // Another op, or a mark: judged as every wait judges it.
  check_announcement(r, Flag::Arrived, generation, what);
  // Nothing to judge by: r rewrote the line for a later piece, which the caller's contract rules
  // out.
  mark_failed(false);
  throw Error(ErrorCode::Internal,
              "rank " + std::to_string(r) + " moved past shared-memory step " +
                  std::to_string(generation) + " before this rank read what it announced there",
              ErrorContext{.op = what, .peers = {r}});
}

void SharedArena::wait_for_all(Flag which, std::uint64_t generation, Deadline deadline,
                               const std::string& what) {
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    if (!reached(r, which, generation)) block_until(r, which, generation, deadline, what);
    check_announcement(r, which, generation, what);
  }
}

void SharedArena::wait_for_eager(int r, std::uint64_t eager, std::uint64_t generation,
                                 Deadline deadline, const std::string& what) {
  if (!reached(r, Flag::Eager, eager))
    block_until(r, Flag::Eager, eager, deadline, what, generation);
  // The usual case, settled from the eager line alone: r wrote this piece in the same op (same
  // announcement) at the same generation. r rewrites the line only after this rank announces
  // Consumed(eager), so what is read here is that piece's. Reading r's Arrived line as well
  // would take it from r's core at every op, and r rewrites it at every op: a line written and
  // read at every op by two cores is handed back and forth, which costs more than the op's own
  // stores.
  std::atomic<std::uint64_t>& value = flag(r, Flag::Eager, eager);
  const FlagLine& line = line_of(value);
  if (value.load(std::memory_order_acquire) == eager) {
    if (line.op_generation.load(std::memory_order_relaxed) == generation &&
        read_announcement(line, eager) == announcement_)
      return;
  }
  // Arrived(generation) first: it tells what r called at this op even once r has failed later
  // (the eager numbering does not: r may never have run an eager op).
  if (reached(r, Flag::Arrived, generation)) check_announcement(r, Flag::Arrived, generation, what);
  check_announcement(r, Flag::Eager, eager, what);
  // Both said nothing, yet r wrote this piece at another generation: the same call, made after
  // other ops than ours (r's Arrived line for our generation was no evidence: r had moved on past
  // it, or had not reached it yet). Taking the piece would hand this rank another op's values. A
  // disagreement mark leaves the piece's announcement and generation in place, so a peer that wrote
  // the piece and failed later is judged by them too.
  const std::uint64_t seen = value.load(std::memory_order_acquire);
  if (seen == eager || (seen == kDisagreed && read_announcement(line, eager).has_value())) {
    const std::uint64_t theirs = line.op_generation.load(std::memory_order_relaxed);
    if (theirs != generation) {
      mark_disagreed(announcement_);
      throw Error(ErrorCode::InvalidArgument,
                  "ranks disagree: rank " + std::to_string(r) + " called " +
                      describe_call(announcement_) + " after other ops than rank " +
                      std::to_string(rank_) + " did (shared-memory step " + std::to_string(theirs) +
                      " against " + std::to_string(generation) +
                      "): an earlier op differs between them",
                  ErrorContext{.op = what, .peers = {r}});
    }
  }
}

void SharedArena::block_until(int r, Flag which, std::uint64_t generation, Deadline deadline,
                              const std::string& what, std::uint64_t arrived) {
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
    if (interruption_ != nullptr) interruption_->check(what, WaitKind::WatchesMemory);
    // A peer that runs another op at this generation never writes what we wait for.
    if (arrived != 0 && reached(r, Flag::Arrived, arrived))
      check_announcement(r, Flag::Arrived, arrived, what);
    const auto now = Clock::now();
    if (now >= deadline) {
      // Only rank r writes an eager line; every rank announces the other flags.
      std::string late;
      for (int p = 0; p < size_; ++p)
        if (p != rank_ && (which != Flag::Eager || p == r) && !reached(p, which, generation))
          late += (late.empty() ? "" : ", ") + std::to_string(p);
      throw Error(
          ErrorCode::Timeout,
          "deadline passed waiting in shared memory for rank" +
              std::string(late.find(',') == std::string::npos ? " " : "s ") + late +
              (which == Flag::Eager || which == Flag::Consumed ? " (eager piece " : " (piece ") +
              std::to_string(generation) + ")",
          ErrorContext{.op = what});
    }
    if (now < spin_until) continue;
    if (now < yield_until) {
      sched_yield();
      continue;
    }
    const ProcessWatch& watch = watches_[static_cast<std::size_t>(r)];
    if (watch.watching() && !watch.alive())
      throw Error(ErrorCode::RemoteError,
                  "rank " + std::to_string(r) +
                      " failed (its process exited) while this rank waited for it in shared memory",
                  ErrorContext{.op = what, .peers = {r}});
    std::this_thread::sleep_for(
        std::min(nap, std::chrono::duration_cast<std::chrono::microseconds>(deadline - now)));
    nap = std::min(nap * 2, kLongestNap);
  }
}

std::string SharedArena::description() const {
  return "shared memory (" + std::to_string(size_) + " ranks, " +
         std::to_string(kSlotBytes / 1024) + " KiB slots)";
}

}  // namespace cohort::transport
