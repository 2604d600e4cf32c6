#pragma once

// How a blocked rank waits: spin on the network for a short budget (lowest latency when it has a
// core to itself), then poll with sched_yield between polls for a few milliseconds, then sleep
// (on the worker's event fd, or in growing naps for shared memory). When more ranks share the
// host than there are hardware threads, spinning steals the core the peer needs to make the
// progress we are waiting for, so the budget shrinks and the spin yields between polls.
//
// The yield phase exists because a sleep/wake handoff costs 25-35 us here: with 3 ranks on 2
// cores, a send/recv ring that slept after 20 us took ~95 us per exchange against Open MPI's
// 2 us, which yields without end. Yielding for milliseconds keeps ranks responsive while a peer
// is merely descheduled, and still lets a rank that waits for seconds stop using a core.

#include <chrono>
#include <optional>

namespace cohort::transport {

/// Spin budget when every local rank has a hardware thread of its own.
inline constexpr std::chrono::microseconds kDedicatedCoreSpin{200};
/// Spin budget when ranks outnumber hardware threads (each poll is followed by sched_yield).
inline constexpr std::chrono::microseconds kOversubscribedSpin{20};
/// How long a wait keeps yielding after its spin budget before it sleeps.
inline constexpr std::chrono::milliseconds kYieldPhase{5};
/// Longest single sleep on the event fd: bounds how late a missed wakeup (or a peer-liveness
/// check) can be noticed.
inline constexpr std::chrono::milliseconds kMaxBlock{50};

struct WaitPolicy {
  std::chrono::microseconds spin{0};
  bool yield_while_spinning = false;
};

/// Picks the policy for `local_world_size` ranks on a host with `hardware_threads` threads
/// (0 = unknown, treated as 1). `spin_override` (COHORT_SPIN_US) replaces the budget but not the
/// yield decision.
WaitPolicy choose_wait_policy(int local_world_size, unsigned hardware_threads,
                              std::optional<std::chrono::microseconds> spin_override);

}  // namespace cohort::transport
