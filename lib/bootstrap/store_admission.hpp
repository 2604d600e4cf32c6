#pragma once

// What the store server lets strangers and resource shortages cost it, as bookkeeping apart from
// the sockets (the server's poll loop asks; tests drive it with made-up times):
//
//  * PendingHandshakes: connections that have not shown the token, oldest first. A newcomer
//    beyond the capacity evicts the oldest; one still pending at its deadline is closed.
//    Evicting the oldest rather than refusing the newcomer: an honest client shows its token in
//    its first round trip, so the oldest is the likeliest stranger, and refusing newcomers would
//    let one idle connection per slot, renewed every deadline, lock every honest client out.
//  * AcceptBackoff: when accept() fails for want of descriptors (EMFILE, ENFILE) or kernel
//    memory (ENOBUFS, ENOMEM), the connection stays queued and the listener stays readable, so
//    polling it again at once would spin. The listener rests for kAcceptBackoff, or until one of
//    the server's own connections closes and frees a descriptor; connections arriving meanwhile
//    wait in the kernel's backlog. The classic alternative, a spare descriptor closed to
//    accept-and-close the backlog, is not used: with strangers capped, exhaustion means the
//    job's own clients exceed the limit, and closing them turns a wait into a failed handshake;
//    it only helps EMFILE (not ENFILE or a memory shortage); and another thread of the process
//    (rank 0's application, the launcher) can take the freed descriptor before it is reopened.
//  * WarningLimiter: strangers decide how often something goes wrong with them (wrong tokens,
//    garbage, idle connections), so a warning per event would let them flood the log.

#include <cohort/store.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace cohort::bootstrap {

/// How long the listener rests after accept() failed for want of resources. Short next to a
/// client's handshake allowance (at least 5 s), long next to one failed accept() (about a
/// microsecond): 10 attempts a second cost nothing, and a freed descriptor is used within 100 ms
/// (at once when one of the server's own clients leaves).
inline constexpr std::chrono::milliseconds kAcceptBackoff{100};

/// At most one warning of a kind in this interval; the others are counted into the next one.
inline constexpr std::chrono::seconds kWarningInterval{10};

/// Connections waiting for their handshake, in accept order, each with its deadline.
class PendingHandshakes {
 public:
  /// `capacity` and `timeout` must be positive (TcpStoreServer checks its options).
  PendingHandshakes(std::size_t capacity, std::chrono::milliseconds timeout)
      : capacity_(capacity), timeout_(timeout) {}

  /// Records connection `id`, accepted at `now`; ids must grow with the accept order. Returns the
  /// connections evicted to make room (oldest first), already forgotten here.
  std::vector<std::uint64_t> admit(std::uint64_t id, Clock::time_point now);
  /// The connection showed its token, or went: it no longer counts. Unknown ids are ignored.
  void remove(std::uint64_t id) { deadlines_.erase(id); }
  /// Connections whose deadline is at or before `now`, oldest first (still recorded).
  std::vector<std::uint64_t> expired(Clock::time_point now) const;
  /// The earliest deadline; none when nobody is waiting.
  std::optional<Clock::time_point> next_deadline() const;
  std::size_t size() const { return deadlines_.size(); }

 private:
  std::size_t capacity_;
  std::chrono::milliseconds timeout_;
  // Ordered by id, that is by accept time, so also by deadline.
  std::map<std::uint64_t, Clock::time_point> deadlines_;
};

/// When the listener may be polled, given how accept() has been failing.
class AcceptBackoff {
 public:
  bool accepting(Clock::time_point now) const { return now >= resume_; }
  /// When polling the listener resumes (meaningful while not accepting).
  Clock::time_point resumes() const { return resume_; }
  /// accept() failed for want of resources at `now`: rest for kAcceptBackoff. True when this
  /// starts a run of failures (warn once per run, not per attempt).
  bool failed(Clock::time_point now);
  /// accept() succeeded at `now`. Returns how long the run of failures it ends lasted, and how
  /// many attempts failed in it; none when there was no such run.
  struct Run {
    std::uint64_t failures;
    Clock::duration lasted;
  };
  std::optional<Run> succeeded(Clock::time_point now);
  /// One of the server's connections closed: a descriptor is free, try the backlog now.
  void descriptor_freed() { resume_ = Clock::time_point{}; }

 private:
  Clock::time_point resume_{};
  std::uint64_t failures_ = 0;  // in the current run; 0 while accepting
  Clock::time_point first_failure_{};
};

/// True when accept() failed with `err` for the connection being accepted alone (Linux passes
/// the new socket's pending network errors to accept()): skip it and accept the next. False
/// when the failure will repeat until something changes (resources, or a broken listener).
bool lost_before_accept(int err) noexcept;

/// Whether a warning may be logged now: the first one, then one per kWarningInterval.
class WarningLimiter {
 public:
  /// True when a warning may be logged at `now`; `held_back` is then how many were refused
  /// since the last one allowed.
  bool allow(Clock::time_point now, std::uint64_t& held_back);

 private:
  bool used_ = false;
  Clock::time_point last_{};
  std::uint64_t held_back_ = 0;
};

/// " (and N more since the last such warning)", or nothing when N is 0.
std::string held_back_note(std::uint64_t held_back);

}  // namespace cohort::bootstrap
