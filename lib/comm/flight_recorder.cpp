// The flight recorder's ring and its JSON dump (the format cohort-trace reads; see
// tools/cohort_trace/flight_dump.hpp for the reader and the meaning of every field).

#include "comm/flight_recorder.hpp"

#include "comm/dump_on_signal.hpp"
#include "core/coarse_clock.hpp"
#include "core/log.hpp"
#include "core/system_error.hpp"
#include "core/tunables.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <limits>
#include <system_error>
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
// reader (cohort-run collecting dumps) never sees a partial file.
void write_atomically(const std::string& path, const std::string& text) {
  const std::string temporary = path + ".tmp." + std::to_string(::getpid());
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
      // Allocated whole up front: recording never allocates.
      ring_(capacity > 0 ? std::make_unique<Entry[]>(capacity) : nullptr),
      awaited_(capacity > 0 ? std::make_unique<AwaitedPeers[]>(capacity) : nullptr),
      remainder_magic_(capacity > 0 ? std::numeric_limits<std::uint64_t>::max() / capacity + 1
                                    : 0) {
  if (!trace_dir_.empty()) dump_on_signal(this);
}

FlightRecorder::~FlightRecorder() {
  if (!trace_dir_.empty()) stop_dumping_on_signal(this);
}

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
  ++recorded_;
}

FlightRecorder::Entry& FlightRecorder::slot_for(std::uint32_t seq) const noexcept {
  // seq % capacity_ by two multiplications instead of a division (Lemire, Kaser and Kurz,
  // "Faster remainder by direct computation", 2019; exact for 32-bit dividends and divisors):
  // every collective finds its slot twice, and the division was a few percent of a tiny op.
  if (capacity_ > std::numeric_limits<std::uint32_t>::max()) return ring_[seq];
  const std::uint64_t low = remainder_magic_ * seq;
  __extension__ typedef unsigned __int128 Wide;  // GCC and clang; __extension__: not ISO C++
  const auto index = static_cast<std::size_t>((static_cast<Wide>(low) * capacity_) >> 64);
  return ring_[index];
}

FlightRecorder::Entry* FlightRecorder::slot_of(std::uint32_t seq) const noexcept {
  Entry& e = slot_for(seq);
  return e.state != OpState::Empty && e.seq == seq ? &e : nullptr;
}

void FlightRecorder::queued(std::uint32_t seq, Collective kind, Algorithm forced,
                            const OpShape& shape, std::chrono::milliseconds timeout,
                            TimePoint now) noexcept {
  if (capacity_ == 0) return;
  std::lock_guard lock(mutex_);
  apply_last_done_locked();
  Entry& e = slot_for(seq);
  fill(e, seq, kind, forced, shape, timeout);
  e.state = OpState::Queued;
  e.queued_ns = ns_of(now);
}

void FlightRecorder::started(std::uint32_t seq, Collective kind, Algorithm forced,
                             const OpShape& shape, std::chrono::milliseconds timeout,
                             TimePoint now) noexcept {
  if (capacity_ == 0) return;
  std::lock_guard lock(mutex_);
  apply_last_done_locked();
  Entry* e = slot_of(seq);
  if (e == nullptr || e->state != OpState::Queued) {
    // Run inline (never queued), or its queued entry was overwritten by a later one (more than
    // capacity ops queued at once): the running op takes the slot back, since what is running
    // (and may be stuck) is what a dump must show; the later op records itself again when it
    // starts.
    e = &slot_for(seq);
    fill(*e, seq, kind, forced, shape, timeout);
    e->queued_ns = ns_of(now);
  }
  e->state = OpState::Started;
  e->started_ns = ns_of(now);
}

void FlightRecorder::done(std::uint32_t seq, Algorithm ran, TimePoint now) noexcept {
  if (capacity_ == 0) return;
  std::lock_guard lock(mutex_);
  apply_last_done_locked();
  Entry* e = slot_of(seq);
  if (e == nullptr) return;
  e->state = OpState::Done;
  e->finished_ns = std::max(ns_of(now), e->started_ns);
  if (ran != Algorithm::Auto) e->algorithm = ran;
}

void FlightRecorder::done_by_driver(std::uint32_t seq, Algorithm ran, TimePoint now) noexcept {
  if (capacity_ == 0) return;
  // Release stores (plain moves on x86, no locked instruction, no fence): a reader that sees
  // any field of this record also sees the odd version written before it.
  const std::uint64_t version = last_done_.version.load(std::memory_order_relaxed);
  last_done_.version.store(version + 1, std::memory_order_relaxed);
  last_done_.seq.store(seq, std::memory_order_release);
  last_done_.ran.store(ran, std::memory_order_release);
  last_done_.finished_ns.store(ns_of(now), std::memory_order_release);
  last_done_.version.store(version + 2, std::memory_order_release);
}

void FlightRecorder::apply_last_done_locked() const noexcept {
  const std::uint64_t before = last_done_.version.load(std::memory_order_acquire);
  if (before == applied_version_ || before % 2 != 0) return;  // nothing new, or being written
  // Acquire loads: the version's second read comes after them, and sees at least the odd
  // version of any newer record one of them saw.
  const std::uint32_t seq = last_done_.seq.load(std::memory_order_acquire);
  const Algorithm ran = last_done_.ran.load(std::memory_order_acquire);
  const std::int64_t finished_ns = last_done_.finished_ns.load(std::memory_order_acquire);
  // Rewritten meanwhile: a later call takes the newer record (a dump may show the op as
  // started a moment longer; the driver's own calls never see a record half written).
  if (last_done_.version.load(std::memory_order_relaxed) != before) return;
  applied_version_ = before;
  Entry* e = slot_of(seq);
  if (e == nullptr || e->state != OpState::Started) return;
  e->state = OpState::Done;
  e->finished_ns = std::max(finished_ns, e->started_ns);
  if (ran != Algorithm::Auto) e->algorithm = ran;
}

void FlightRecorder::failed(std::uint32_t seq, const Error& error, TimePoint now) noexcept {
  if (capacity_ == 0) return;
  const ErrorContext& context = error.context();
  // Parsed before taking the lock; algorithm_from_name does not allocate.
  const std::optional<Algorithm> running =
      context.algorithm.empty() ? std::nullopt : algorithm_from_name(context.algorithm);
  std::lock_guard lock(mutex_);
  apply_last_done_locked();
  Entry* e = slot_of(seq);
  if (e == nullptr) return;
  e->state = OpState::Failed;
  e->finished_ns = ns_of(now);
  if (running) e->algorithm = *running;
  e->peers_total = static_cast<std::uint32_t>(context.peers.size());
  e->peer_count =
      static_cast<std::uint8_t>(std::min(context.peers.size(), AwaitedPeers::kMaxPeers));
  AwaitedPeers& awaited = awaited_[static_cast<std::size_t>(e - ring_.get())];
  for (std::size_t i = 0; i < e->peer_count; ++i) awaited.peers[i] = context.peers[i];
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
  // Copied out under the lock, formatted without it: the op path waits at most for the copy.
  struct Copied {
    Entry e;
    AwaitedPeers awaited;
  };
  std::vector<Copied> entries;
  std::optional<Error> failure;
  std::uint64_t recorded = 0;
  {
    std::lock_guard lock(mutex_);
    apply_last_done_locked();
    for (std::size_t i = 0; i < capacity_; ++i)
      if (ring_[i].state != OpState::Empty)
        entries.push_back({ring_[i], ring_[i].peer_count > 0 ? awaited_[i] : AwaitedPeers{}});
    failure = failure_;
    recorded = recorded_;
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
    f["op"] = context.op;
    f["sequence"] = context.sequence ? ordered_json(*context.sequence) : ordered_json(nullptr);
    f["peers"] = context.peers;
    doc["failure"] = std::move(f);
  } else {
    doc["failure"] = nullptr;
  }
  doc["ops"] = std::move(ops);
  // Invalid UTF-8 in a message (a peer's host name, an OS string) is replaced, never thrown on.
  return doc.dump(1, ' ', false, ordered_json::error_handler_t::replace) + "\n";
}

}  // namespace cohort::comm
