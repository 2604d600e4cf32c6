#pragma once

// The user's sends and receives between being posted and finishing: each posted transfer is held
// here with its deadline, the owners of its buffer and the Work that reports it, and every poll
// tests each of them once. States of one transfer:
//
//   in flight  posted; each poll() tests it. Leaves when the transport says it is done (buffer
//              owners dropped, then its Work succeeds), or becomes failed.
//   failed     a poll found it failed (the transport threw, or its deadline passed) and
//              reported it. Still held: its request may still be posted at the transport, which
//              may still write into its buffer. Polls skip it.
//   gone       cancel_all() (Transport::cancel_all first) released it and failed its Work.
//
// The owner (the executor) calls cancel_all() right after a poll reports a failure, so at most
// one transfer is ever failed.
//
// Not thread-safe: used only by the thread currently driving the transport.

#include <cohort/error.hpp>

#include "comm/work_state.hpp"
#include "transport/transport.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace cohort::comm {

/// One send or receive, already validated.
struct PointToPoint {
  bool is_send = true;
  int peer = 0;
  int user_tag = 0;
  void* data = nullptr;  ///< read only for sends
  std::size_t bytes = 0;
  /// The buffer's owner (may be null), held until completion. One pointer, not a list: a
  /// small send/recv allocates nothing for it.
  std::shared_ptr<void> owner;
};

/// A transfer a poll found failed: its Work is not finished yet (cancel_all() finishes it).
struct TransferFailure {
  ErrorContext op;  ///< the transfer, as its Work names it (WorkState::context)
  /// The transport's error, or Timeout naming the peer and tag; its context names the transfer
  /// (`op`'s fields) and its peer.
  Error error;
};

class InFlightTransfers {
 public:
  /// `tag_id` goes into every message tag (transport::p2p_tag).
  InFlightTransfers(transport::Transport& transport, std::uint32_t tag_id) noexcept
      : transport_(transport), tag_id_(tag_id) {}
  /// Transfers still held are cancelled as by cancel_all(), their Works failing with
  /// InvalidUsage: their owner went away with them in flight. Never throws.
  ~InFlightTransfers();
  InFlightTransfers(const InFlightTransfers&) = delete;
  InFlightTransfers& operator=(const InFlightTransfers&) = delete;

  enum class Posted {
    Held,      ///< in flight: `work` reports its outcome
    Finished,  ///< done at post; nothing held, and `work` was not touched
  };
  /// Posts `p2p` (never blocks) and holds it, with its buffer's owner, until it completes or
  /// `timeout` from now passes; `work` (which names the transfer) reports the outcome. A send that
  /// left at once (Request::completed()) is not held: its buffer's owner is dropped and
  /// Finished returned, and the caller finishes `work` (or hands out detail::finished_work()
  /// instead, and keeps `work` for a later transfer). If posting throws, nothing is held and
  /// `work` is left untouched.
  [[nodiscard]] Posted post(PointToPoint&& p2p, std::chrono::milliseconds timeout,
                            const std::shared_ptr<detail::WorkState>& work);

  struct PollResult {
    std::size_t completed = 0;  ///< transfers that finished successfully
    /// Set: the poll stopped at this transfer. A pointer, not an optional: GCC zeroed the
    /// optional's whole storage (an Error) at every poll.
    std::unique_ptr<TransferFailure> failure;
  };
  /// Tests each held transfer once, in posting order. A completed one is released (its buffer
  /// owners dropped) and then its Work finishes; later transfers may complete before earlier
  /// ones. A transfer the transport fails, or whose deadline has passed, is marked failed and
  /// reported, and the poll stops there. Never throws.
  PollResult poll() noexcept;

  /// Cancels every request at the transport (Transport::cancel_all: the collectives' too) and
  /// lets go of every held transfer: the failed one's Work fails with `cause`, every other's
  /// with `unusable(its op)` (its Work's context). Buffer owners are dropped only after the
  /// cancel. Never throws.
  void cancel_all(const Error& cause,
                  const std::function<Error(const ErrorContext& op)>& unusable) noexcept;

  /// The blocking form: posts `p2p` and waits for it alone (Transport::wait) until `deadline`;
  /// nothing is held here. Throws the transport's Error, after which the request may still be
  /// posted: the caller calls cancel_all() before `p2p`'s buffer goes away.
  void run_blocking(const PointToPoint& p2p, transport::Deadline deadline, const std::string& what);
  /// The same for a receive and a send posted together, the receive first (MPI_Sendrecv), and
  /// waited for together.
  void run_blocking_pair(const PointToPoint& recv, const PointToPoint& send,
                         transport::Deadline deadline, const std::string& what);

  /// Transfers held (a failed one included).
  std::size_t count() const noexcept { return transfers_.size(); }

 private:
  struct Transfer {
    transport::Request request;
    transport::Deadline deadline;
    std::chrono::milliseconds timeout{0};
    int peer = 0;
    int user_tag = 0;
    bool failed = false;
    std::shared_ptr<detail::WorkState> work;
    std::shared_ptr<void> owner;
  };

  transport::Request post_request(const PointToPoint& p2p);
  /// Marks `t` failed with `error` and reports it in `result` (the poll stops there). Out of the
  /// poll's loop, so the loop builds no Error unless one happens.
  [[gnu::cold]] static void report_failure(Transfer& t, const Error& error, PollResult& result);

  transport::Transport& transport_;
  const std::uint32_t tag_id_;
  std::vector<Transfer> transfers_;  // in posting order
};

}  // namespace cohort::comm
