// The flight recorder's ring and its JSON dump (the format cohort-trace reads; see
// tools/cohort_trace/flight_dump.hpp for the reader and the meaning of every field).

#include "comm/flight_recorder.hpp"

#include "comm/dump_on_signal.hpp"
#include "core/coarse_clock.hpp"
#include "core/log.hpp"
#include "core/memory_fence.hpp"
#include "core/system_error.hpp"
#include "core/tunables.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <filesystem>
#include <limits>
#include <system_error>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <time.h>
#include <unistd.h>

namespace cohort::comm {
namespace {

using nlohmann::ordered_json;

constexpr int kFormatVersion = 1;
constexpr const char* kFormatName = "cohort-flight-record";

std::int64_t ns_of(FlightRecorder::TimePoint t) noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

std::string_view reason_name(DumpReason reason) noexcept {
  switch (reason) {
    case DumpReason::Failure: return "failure";
    case DumpReason::Signal: return "signal";
    case DumpReason::Request: return "request";
  }
  return "request";
}

// A job id as part of a file name: anything but [A-Za-z0-9._-] becomes '_' (Slurm's "123.0" stays,
// a PMIx namespace's '/' or ':' does not make a path).
std::string file_name_part(const std::string& text) {
  std::string out = text;
  for (char& c : out) {
    const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                       c == '.' || c == '_' || c == '-';
    if (!plain) c = '_';
  }
  return out;
}

std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return {};
  return name;
}

// Writes `text` to `path` through a temporary file in the same directory and a rename, so a
// reader (cohort-run collecting dumps) never sees a partial file. The temporary's name is this
// dump's alone: two dumps of one recorder at once (a failure's on the failing thread, a SIGUSR1
// request's on the signal thread) writing one file would interleave their bytes.
void write_atomically(const std::string& path, const std::string& text) {
  static std::atomic<std::uint64_t> dumps{0};
  const std::string temporary = path + ".tmp." + std::to_string(::getpid()) + "." +
                                std::to_string(dumps.fetch_add(1, std::memory_order_relaxed));
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw system_error("cannot create flight record " + temporary, errno);
  std::size_t written = 0;
  while (written < text.size()) {
    const ssize_t n = ::write(fd, text.data() + written, text.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      ::unlink(temporary.c_str());
      throw system_error("cannot write flight record " + temporary, err);
    }
    written += static_cast<std::size_t>(n);
  }
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(temporary.c_str());
    throw system_error("cannot write flight record " + temporary, err);
  }
  if (::rename(temporary.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(temporary.c_str());
    throw system_error("cannot rename flight record to " + path, err);
  }
}

}  // namespace

std::string_view op_state_name(OpState state) noexcept {
  switch (state) {
    case OpState::Empty: return "empty";
    case OpState::Queued: return "queued";
    case OpState::Started: return "started";
    case OpState::Done: return "done";
    case OpState::Failed: return "failed";
  }
  return "empty";
}

FlightRecorder::TimePoint FlightRecorder::coarse_now() noexcept {
  return cohort::coarse_now();
}

FlightRecorder::FlightRecorder(RecorderIdentity identity)
    : FlightRecorder(std::move(identity), tunables().trace_buffer,
                     tunables().trace_dir.value_or(std::string())) {}

FlightRecorder::FlightRecorder(RecorderIdentity identity, std::size_t capacity,
                               std::string trace_dir)
    : identity_(std::move(identity)),
      capacity_(capacity),
      trace_dir_(std::move(trace_dir)),
      remainder_magic_(capacity > 0 ? std::numeric_limits<std::uint64_t>::max() / capacity + 1 : 0),
      // Allocated whole up front: recording never allocates.
      driver_ring_(capacity > 0 ? std::make_unique<DriverSlot[]>(capacity) : nullptr),
      driver_peers_(capacity > 0 ? std::make_unique<DriverPeers[]>(capacity) : nullptr),
      side_ring_(capacity > 0 ? std::make_unique<Entry[]>(capacity) : nullptr),
      side_awaited_(capacity > 0 ? std::make_unique<AwaitedPeers[]>(capacity) : nullptr) {
  if (!trace_dir_.empty()) dump_on_signal(this);
}

FlightRecorder::~FlightRecorder() {
  if (!trace_dir_.empty()) stop_dumping_on_signal(this);
}

std::size_t FlightRecorder::index_of(std::uint32_t seq) const noexcept {
  // seq % capacity_ by two multiplications instead of a division (Lemire, Kaser and Kurz,
  // "Faster remainder by direct computation", 2019; exact for 32-bit dividends and divisors):
  // every collective finds its slot twice, and the division was a few percent of a tiny op.
  if (capacity_ > std::numeric_limits<std::uint32_t>::max()) return seq;
  const std::uint64_t low = remainder_magic_ * seq;
  __extension__ typedef unsigned __int128 Wide;  // GCC and clang; __extension__: not ISO C++
  return static_cast<std::size_t>((static_cast<Wide>(low) * capacity_) >> 64);
}

// ---- The driver's ring -------------------------------------------------------------------

// A seqlock's writer (one at a time): the version goes odd, the fields are written, the version
// goes even. The release fence keeps the field stores after the odd version for a reader that
// sees one of them; the release store of the even version keeps them before it. On x86 all of
// it is plain moves: no locked instruction, no fence instruction.
class FlightRecorder::SlotWrite {
 public:
  explicit SlotWrite(DriverSlot& slot) noexcept
      : slot_(slot), version_(slot.version.load(std::memory_order_relaxed)) {
    slot_.version.store(version_ + 1, std::memory_order_relaxed);
    memory_fence(std::memory_order_release);
  }
  ~SlotWrite() { slot_.version.store(version_ + 2, std::memory_order_release); }
  SlotWrite(const SlotWrite&) = delete;
  SlotWrite& operator=(const SlotWrite&) = delete;

 private:
  DriverSlot& slot_;
  const std::uint32_t version_;
};

void FlightRecorder::started(std::uint32_t seq, Collective kind, Algorithm forced,
                             const OpShape& shape, std::chrono::milliseconds timeout, TimePoint now,
                             TimePoint queued_at) noexcept {
  if (capacity_ == 0) return;
  constexpr auto relaxed = std::memory_order_relaxed;
  const bool was_queued = queued_at != TimePoint{};
  DriverSlot& s = driver_ring_[index_of(seq)];
  {
    // A running op takes its slot whatever it held: what is running (and may be stuck) is
    // what a dump must show.
    const SlotWrite write(s);
    s.seq.store(seq, relaxed);
    s.state.store(OpState::Started, relaxed);
    s.kind.store(kind, relaxed);
    s.algorithm.store(forced, relaxed);
    s.dtype.store(shape.dtype ? static_cast<std::uint8_t>(*shape.dtype) : kNone, relaxed);
    s.reduce_op.store(shape.reduce_op ? static_cast<std::uint8_t>(*shape.reduce_op) : kNone,
                      relaxed);
    s.peer_count.store(0, relaxed);
    s.root.store(shape.root, relaxed);
    s.peers_total.store(0, relaxed);
    s.count.store(shape.count, relaxed);
    s.timeout_ms.store(timeout.count(), relaxed);
    s.queued_ns.store(ns_of(was_queued ? queued_at : now), relaxed);
    s.started_ns.store(ns_of(now), relaxed);
    s.finished_ns.store(0, relaxed);
  }
  // A queued op was counted when it was queued. Load and store: the driver is the only writer.
  if (!was_queued) driver_recorded_.store(driver_recorded_.load(relaxed) + 1, relaxed);
  // Release: a dump that reads this number also sees the entry written above.
  started_through_.store(seq, std::memory_order_release);
  if (!started_any_.load(relaxed)) started_any_.store(true, std::memory_order_release);
}

void FlightRecorder::done(std::uint32_t seq, Algorithm ran, TimePoint now) noexcept {
  if (capacity_ == 0) return;
  constexpr auto relaxed = std::memory_order_relaxed;
  DriverSlot& s = driver_ring_[index_of(seq)];
  // The driver's own slot: its relaxed loads see what it wrote last.
  if (s.seq.load(relaxed) != seq || s.state.load(relaxed) != OpState::Started) return;
  const SlotWrite write(s);
  s.state.store(OpState::Done, relaxed);
  s.finished_ns.store(std::max(ns_of(now), s.started_ns.load(relaxed)), relaxed);
  if (ran != Algorithm::Auto) s.algorithm.store(ran, relaxed);
}

void FlightRecorder::failed(std::uint32_t seq, const Error& error, TimePoint now) noexcept {
  if (capacity_ == 0) return;
  constexpr auto relaxed = std::memory_order_relaxed;
  const std::size_t index = index_of(seq);
  DriverSlot& s = driver_ring_[index];
  if (s.seq.load(relaxed) != seq || s.state.load(relaxed) == OpState::Empty) return;
  Entry e;
  AwaitedPeers awaited;
  note_failure(e, awaited, error, ns_of(now));
  const SlotWrite write(s);
  s.state.store(OpState::Failed, relaxed);
  s.finished_ns.store(e.finished_ns, relaxed);
  if (e.algorithm != Algorithm::Auto) s.algorithm.store(e.algorithm, relaxed);
  s.peers_total.store(e.peers_total, relaxed);
  s.peer_count.store(e.peer_count, relaxed);
  for (std::size_t i = 0; i < e.peer_count; ++i)
    driver_peers_[index].peers[i].store(awaited.peers[i], relaxed);
}

std::optional<std::uint32_t> FlightRecorder::copy_driver_ring(std::vector<Copied>& out) const {
  if (capacity_ == 0 || !started_any_.load(std::memory_order_acquire)) return std::nullopt;
  constexpr auto relaxed = std::memory_order_relaxed;
  // A slot being written is read again: at once a few times, then between yields, since its
  // writer may have been preempted in the middle (ranks outnumber cores). Given up after
  // kSlotPatience, leaving that one entry out (a stopped driver, say, in a debugger).
  constexpr int kSlotSpins = 64;
  constexpr auto kSlotPatience = std::chrono::milliseconds(100);
  // The ring is read slot by slot while the driver goes on: ops it starts during the copy may
  // replace older ones in slots read after them, leaving gaps. A copy during which the driver
  // started nothing is whole; after a few tries, keep what is sure to be whole (below).
  constexpr int kRingTries = 4;
  std::vector<Copied> copied;
  copied.reserve(capacity_);
  std::uint32_t before = 0, after = 0;
  bool gave_up = false;
  for (int attempt = 0; attempt < kRingTries; ++attempt) {
    copied.clear();
    gave_up = false;
    before = started_through_.load(std::memory_order_acquire);
    for (std::size_t i = 0; i < capacity_; ++i) {
      const DriverSlot& s = driver_ring_[i];
      std::optional<std::chrono::steady_clock::time_point> give_up;
      for (int t = 0;; ++t) {
        if (t >= kSlotSpins) {
          const auto now = std::chrono::steady_clock::now();
          if (!give_up) give_up = now + kSlotPatience;
          if (now > *give_up) {
            gave_up = true;
            break;
          }
          std::this_thread::yield();
        }
        const std::uint32_t version = s.version.load(std::memory_order_acquire);
        if (version % 2 != 0) continue;
        Copied c;
        Entry& e = c.e;
        e.seq = s.seq.load(relaxed);
        e.state = s.state.load(relaxed);
        e.kind = s.kind.load(relaxed);
        e.algorithm = s.algorithm.load(relaxed);
        e.dtype = s.dtype.load(relaxed);
        e.reduce_op = s.reduce_op.load(relaxed);
        e.peer_count = s.peer_count.load(relaxed);
        e.root = s.root.load(relaxed);
        e.peers_total = s.peers_total.load(relaxed);
        e.count = s.count.load(relaxed);
        e.timeout_ms = s.timeout_ms.load(relaxed);
        e.queued_ns = s.queued_ns.load(relaxed);
        e.started_ns = s.started_ns.load(relaxed);
        e.finished_ns = s.finished_ns.load(relaxed);
        for (std::size_t p = 0; p < std::min<std::size_t>(e.peer_count, kMaxPeers); ++p)
          c.awaited.peers[p] = driver_peers_[i].peers[p].load(relaxed);
        memory_fence(std::memory_order_acquire);
        if (s.version.load(relaxed) != version) continue;
        if (e.state != OpState::Empty) copied.push_back(c);
        break;
      }
    }
    after = started_through_.load(std::memory_order_acquire);
    if (after == before) break;
  }
  if (after != before) {
    // Ops before-cap+1 .. before were whole before the copy began, and the driver's ops since
    // (before+1 .. after) overwrote only the slots of before-cap+1 .. after-cap: keep the ones
    // past after-cap up to `before`, and the newer ones read after them as long as none is
    // missing.
    const std::uint32_t cap = static_cast<std::uint32_t>(
        std::min<std::size_t>(capacity_, std::numeric_limits<std::uint32_t>::max()));
    const std::uint32_t oldest_whole = after - cap + 1;
    std::vector<Copied> kept;
    for (const Copied& c : copied) {
      const auto from_oldest = static_cast<std::int64_t>(c.e.seq - oldest_whole);
      const auto past_before = static_cast<std::int32_t>(c.e.seq - before);
      if (from_oldest >= 0 && from_oldest < cap && past_before <= 0) kept.push_back(c);
    }
    std::uint32_t next = before + 1;
    for (bool found = true; found;) {
      found = false;
      for (const Copied& c : copied)
        if (c.e.seq == next && static_cast<std::int32_t>(next - after) <= 0) {
          kept.push_back(c);
          ++next;
          found = true;
          break;
        }
    }
    copied = std::move(kept);
    // Queued records past the newest op kept show as queued: late, but without a gap.
    after = next - 1;
  }
  // A slot left out is the newest op's (the one its stuck writer was recording): only what was
  // copied makes queued records stale, so a queued op left out still shows, as queued.
  if (gave_up) {
    if (copied.empty()) return std::nullopt;
    after = copied.front().e.seq;
    for (const Copied& c : copied)
      if (static_cast<std::int32_t>(c.e.seq - after) > 0) after = c.e.seq;
  }
  // An op the driver started during the copy, whose number it had not yet published when
  // `after` was read, covers its queued record too.
  for (const Copied& c : copied)
    if (static_cast<std::int32_t>(c.e.seq - after) > 0) after = c.e.seq;
  out.insert(out.end(), copied.begin(), copied.end());
  return after;
}

// ---- The side ring -----------------------------------------------------------------------

void FlightRecorder::fill(Entry& e, std::uint32_t seq, Collective kind, Algorithm forced,
                          const OpShape& shape, std::chrono::milliseconds timeout) noexcept {
  e = Entry{};
  e.seq = seq;
  e.kind = kind;
  e.algorithm = forced;
  e.dtype = shape.dtype ? static_cast<std::uint8_t>(*shape.dtype) : kNone;
  e.reduce_op = shape.reduce_op ? static_cast<std::uint8_t>(*shape.reduce_op) : kNone;
  e.root = shape.root;
  e.count = shape.count;
  e.timeout_ms = timeout.count();
}

FlightRecorder::Entry* FlightRecorder::side_slot_of(std::uint32_t seq) noexcept {
  Entry& e = side_ring_[index_of(seq)];
  return e.state != OpState::Empty && e.seq == seq ? &e : nullptr;
}

void FlightRecorder::note_failure(Entry& e, AwaitedPeers& awaited, const Error& error,
                                  std::int64_t finished_ns) noexcept {
  const ErrorContext& context = error.context();
  // algorithm_from_name does not allocate.
  const std::optional<Algorithm> running =
      context.algorithm.empty() ? std::nullopt : algorithm_from_name(context.algorithm);
  e.state = OpState::Failed;
  e.finished_ns = finished_ns;
  if (running) e.algorithm = *running;
  e.peers_total = static_cast<std::uint32_t>(context.peers.size());
  e.peer_count = static_cast<std::uint8_t>(std::min(context.peers.size(), kMaxPeers));
  for (std::size_t i = 0; i < e.peer_count; ++i) awaited.peers[i] = context.peers[i];
}

void FlightRecorder::queued(std::uint32_t seq, Collective kind, Algorithm forced,
                            const OpShape& shape, std::chrono::milliseconds timeout,
                            TimePoint now) noexcept {
  if (capacity_ == 0) return;
  std::lock_guard lock(mutex_);
  Entry& e = side_ring_[index_of(seq)];
  fill(e, seq, kind, forced, shape, timeout);
  e.state = OpState::Queued;
  e.queued_ns = ns_of(now);
  ++side_recorded_;
}

void FlightRecorder::external_started(std::uint32_t seq, Collective kind, Algorithm forced,
                                      const OpShape& shape, std::chrono::milliseconds timeout,
                                      TimePoint now) noexcept {
  if (capacity_ == 0) return;
  std::lock_guard lock(mutex_);
  Entry& e = side_ring_[index_of(seq)];
  fill(e, seq, kind, forced, shape, timeout);
  e.state = OpState::Started;
  e.queued_ns = e.started_ns = ns_of(now);
  ++side_recorded_;
}

void FlightRecorder::external_done(std::uint32_t seq, TimePoint now) noexcept {
  if (capacity_ == 0) return;
  std::lock_guard lock(mutex_);
  Entry* e = side_slot_of(seq);
  if (e == nullptr || e->state != OpState::Started) return;
  e->state = OpState::Done;
  e->finished_ns = std::max(ns_of(now), e->started_ns);
}

void FlightRecorder::external_failed(std::uint32_t seq, const Error& error,
                                     TimePoint now) noexcept {
  if (capacity_ == 0) return;
  std::lock_guard lock(mutex_);
  Entry* e = side_slot_of(seq);
  if (e == nullptr) return;
  note_failure(*e, side_awaited_[index_of(seq)], error, ns_of(now));
}

void FlightRecorder::record_failure(const Error& cause) noexcept {
  try {
    bool first = false;
    {
      std::lock_guard lock(mutex_);
      first = !failure_;
      if (first) failure_ = cause;
    }
    // One dump per communicator: later errors are consequences of the first (fail-fast ops,
    // cancelled transfers) and would overwrite the record of what went wrong.
    if (!first || trace_dir_.empty()) return;
    const std::string path = dump({}, DumpReason::Failure);
    COHORT_LOG_ERROR("communicator {}: flight record written to {}", identity_.communicator, path);
  } catch (const std::exception& e) {
    COHORT_LOG_ERROR("communicator {}: could not write its flight record: {}",
                     identity_.communicator, e.what());
  }
}

std::string FlightRecorder::default_path() const {
  const std::string job =
      identity_.job_id.empty() ? std::to_string(::getpid()) : file_name_part(identity_.job_id);
  const std::filesystem::path dir = trace_dir_.empty() ? std::filesystem::temp_directory_path()
                                                       : std::filesystem::path(trace_dir_);
  const std::string name = "cohort-trace." + job + ".comm" +
                           std::to_string(identity_.communicator) + ".rank" +
                           std::to_string(identity_.rank) + ".json";
  return (dir / name).string();
}

std::string FlightRecorder::dump(const std::string& path, DumpReason reason) const {
  std::string target = path;
  if (target.empty()) {
    target = default_path();
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(target).parent_path(), ec);
    if (ec) throw system_error("cannot create the trace directory for " + target, ec.value());
  }
  write_atomically(target, to_json(reason));
  return target;
}

std::string FlightRecorder::to_json(DumpReason reason) const {
  // Copied out, formatted afterwards: the side ring under the lock (its writers wait at most
  // for the copy), then the driver's ring around its writer (copy_driver_ring). In that order:
  // a queued op the driver started after the side ring's copy is in the driver's copy, so
  // nothing falls between the two (but ops queued past the side ring's capacity).
  std::vector<Copied> side;
  side.reserve(capacity_);  // not under the lock, which the executor may wait on for a queued op
  std::optional<Error> failure;
  std::uint64_t recorded = 0;
  {
    std::lock_guard lock(mutex_);
    for (std::size_t i = 0; i < capacity_; ++i)
      if (side_ring_[i].state != OpState::Empty)
        side.push_back(
            {side_ring_[i], side_ring_[i].peer_count > 0 ? side_awaited_[i] : AwaitedPeers{}});
    failure = failure_;
    recorded = side_recorded_;
  }
  std::vector<Copied> entries;
  const std::optional<std::uint32_t> started_through = copy_driver_ring(entries);
  recorded += driver_recorded_.load(std::memory_order_relaxed);
  for (const Copied& c : side) {
    // A queued op the driver has started since shows from its ring (or, overwritten there, no
    // longer at all). Nothing else is in both: the driver's ring holds only ops up to
    // started_through, and external ops have numbers of their own.
    if (c.e.state == OpState::Queued && started_through &&
        static_cast<std::int32_t>(c.e.seq - *started_through) <= 0)
      continue;
    entries.push_back(c);
  }
  // Oldest first. Sequence numbers are 32-bit: ordering by distance from the newest keeps a
  // wrapped ring in call order.
  if (!entries.empty()) {
    std::uint32_t newest = entries[0].e.seq;
    for (const Copied& c : entries)
      if (static_cast<std::int32_t>(c.e.seq - newest) > 0) newest = c.e.seq;
    std::sort(entries.begin(), entries.end(), [newest](const Copied& a, const Copied& b) {
      return newest - a.e.seq > newest - b.e.seq;
    });
  }

  // Steady-clock stamps become wall-clock microseconds, so ranks on different hosts compare.
  const auto wall_now = std::chrono::system_clock::now();
  const std::int64_t steady_now = ns_of(std::chrono::steady_clock::now());
  const std::int64_t wall_now_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(wall_now.time_since_epoch()).count();
  const auto wall_us = [&](std::int64_t steady_ns) -> ordered_json {
    if (steady_ns == 0) return nullptr;
    return (steady_ns + (wall_now_ns - steady_now)) / 1000;
  };

  ordered_json ops = ordered_json::array();
  for (const Copied& c : entries) {
    const Entry& e = c.e;
    ordered_json op;
    op["seq"] = e.seq;
    op["op"] = collective_name(e.kind);
    op["dtype"] = e.dtype == kNone ? ordered_json(nullptr)
                                   : ordered_json(dtype_name(static_cast<DType>(e.dtype)));
    op["reduce_op"] = e.reduce_op == kNone
                          ? ordered_json(nullptr)
                          : ordered_json(reduce_op_name(static_cast<ReduceOp>(e.reduce_op)));
    op["count"] = e.count;
    op["root"] = e.root < 0 ? ordered_json(nullptr) : ordered_json(e.root);
    op["algorithm"] = e.algorithm == Algorithm::Auto ? ordered_json(nullptr)
                                                     : ordered_json(algorithm_name(e.algorithm));
    op["state"] = op_state_name(e.state);
    op["timeout_ms"] = e.timeout_ms;
    op["queued_us"] = wall_us(e.queued_ns);
    op["started_us"] = wall_us(e.started_ns);
    op["finished_us"] = wall_us(e.finished_ns);
    ordered_json peers = ordered_json::array();
    for (std::size_t i = 0; i < e.peer_count; ++i) peers.push_back(c.awaited.peers[i]);
    op["awaited_peers"] = std::move(peers);
    if (e.peers_total > e.peer_count) op["awaited_peers_total"] = e.peers_total;
    ops.push_back(std::move(op));
  }

  ordered_json doc;
  doc["format"] = kFormatName;
  doc["version"] = kFormatVersion;
  doc["job"] = identity_.job_id;
  doc["pid"] = static_cast<long>(::getpid());
  doc["host"] = host_name();
  doc["communicator"] = identity_.communicator;
  doc["rank"] = identity_.rank;
  doc["size"] = identity_.size;
  doc["reason"] = reason_name(reason);
  doc["dumped_at_us"] = wall_now_ns / 1000;
  doc["capacity"] = capacity_;
  doc["recorded"] = recorded;
  if (failure) {
    const ErrorContext& context = failure->context();
    ordered_json f;
    f["code"] = error_code_name(failure->code());
    f["message"] = failure->message();
    const auto or_null = [](const auto& value) {
      return value ? ordered_json(*value) : ordered_json(nullptr);
    };
    f["op"] = context.op;
    f["name"] = format_context(context);
    f["sequence"] = or_null(context.sequence);
    f["peers"] = context.peers;
    f["to_rank"] = or_null(context.to_rank);
    f["from_rank"] = or_null(context.from_rank);
    f["tag"] = or_null(context.tag);
    doc["failure"] = std::move(f);
  } else {
    doc["failure"] = nullptr;
  }
  doc["ops"] = std::move(ops);
  // Invalid UTF-8 in a message (a peer's host name, an OS string) is replaced, never thrown on.
  return doc.dump(1, ' ', false, ordered_json::error_handler_t::replace) + "\n";
}

}  // namespace cohort::comm
