#include "comm/p2p_inflight.hpp"

#include "core/coarse_clock.hpp"
#include "core/log.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <exception>
#include <span>
#include <utility>

namespace cohort::comm {

using Clock = std::chrono::steady_clock;

InFlightTransfers::~InFlightTransfers() {
  if (transfers_.empty()) return;
  COHORT_LOG_ERROR("{} send/recv still in flight when their communicator went away; cancelling",
                   transfers_.size());
  const Error abandoned(ErrorCode::InvalidUsage,
                        "a send/recv was still in flight when its communicator was destroyed");
  cancel_all(abandoned, [](const ErrorContext& op) {
    return Error(ErrorCode::InvalidUsage, "still in flight when its communicator was destroyed",
                 op);
  });
}

transport::Request InFlightTransfers::post_request(const PointToPoint& p2p) {
  const transport::Tag tag = transport::p2p_tag(tag_id_, static_cast<std::uint32_t>(p2p.user_tag));
  if (p2p.is_send) return transport_.post_send(p2p.peer, p2p.data, p2p.bytes, tag);
  return transport_.post_recv(p2p.peer, p2p.data, p2p.bytes, tag);
}

InFlightTransfers::Posted InFlightTransfers::post(PointToPoint&& p2p,
                                                  std::chrono::milliseconds timeout,
                                                  const std::shared_ptr<detail::WorkState>& work) {
  // Room first: once the request is posted, holding it must not fail, or its buffer could go
  // away under the transport.
  if (transfers_.size() == transfers_.capacity())
    transfers_.reserve(std::max<std::size_t>(8, 2 * transfers_.capacity()));
  const transport::Request request = post_request(p2p);
  if (request.is_completed()) {  // a small send that left at once: nothing to hold
    p2p.owner.reset();
    return Posted::Finished;
  }
  // The deadline from the coarse clock plus a tick (never early, at most a tick late), checked
  // against the coarse clock in poll(): a precise read was a sixth of a small send's cost.
  transfers_.push_back(Transfer{request, coarse_deadline(timeout), timeout, p2p.peer, p2p.user_tag,
                                false, work, std::move(p2p.owner)});
  return Posted::Held;
}

InFlightTransfers::PollResult InFlightTransfers::poll() noexcept {
  PollResult result;
  const auto now = coarse_now();  // cheap; the deadlines carry a tick of margin (see post)
  for (std::size_t i = 0; i < transfers_.size();) {
    Transfer& t = transfers_[i];
    if (t.failed) {
      ++i;
      continue;
    }
    bool done = false;
    try {
      done = transport_.test(t.request);
    } catch (const Error& e) {
      report_failure(t, e, result);
      return result;
    } catch (const std::exception& e) {
      report_failure(t, Error(ErrorCode::Internal, e.what()), result);
      return result;
    }
    if (done) {
      // Drop the buffer owners before waking the Work's waiters: a finished Work means the
      // transfer no longer holds the buffers.
      auto work = std::move(t.work);
      transfers_.erase(transfers_.begin() + static_cast<std::ptrdiff_t>(i));
      work->complete(nullptr);
      ++result.completed;
      continue;
    }
    if (now >= t.deadline) {
      report_failure(t,
                     Error(ErrorCode::Timeout,
                           fmt::format("timed out after {} ms; peers not heard from: {} (tag {})",
                                       t.timeout.count(), t.peer, t.user_tag),
                           ErrorContext{}),
                     result);
      return result;
    }
    ++i;
  }
  return result;
}

void InFlightTransfers::report_failure(Transfer& t, const Error& error, PollResult& result) {
  t.failed = true;
  // Named as the transfer it was (the transport knew only its request). Allocation is the only
  // thing that can throw here, and the poll's noexcept then ends the process.
  ErrorContext op = t.work->context();
  ErrorContext named = op;
  named.peers = {t.peer};
  result.failure =
      std::make_unique<TransferFailure>(TransferFailure{std::move(op), error.with_context(named)});
}

void InFlightTransfers::cancel_all(
    const Error& cause, const std::function<Error(const ErrorContext& op)>& unusable) noexcept {
  transport_.cancel_all();
  std::vector<Transfer> released;
  released.swap(transfers_);
  try {
    for (Transfer& t : released) {
      // A transfer UCX could not take back may still touch the buffer: the transport keeps
      // its owner until that ended.
      transport_.retain_until_quiet(tag_id_, std::move(t.owner));
      t.work->complete(std::make_exception_ptr(t.failed ? cause : unusable(t.work->context())));
    }
  } catch (const std::exception& e) {
    // Only allocation can fail here; the Works would then never finish, so abort loudly.
    COHORT_LOG_ERROR("failing in-flight sends/receives after an error: {}", e.what());
    std::terminate();
  }
}

void InFlightTransfers::run_blocking(const PointToPoint& p2p, transport::Deadline deadline,
                                     const std::string& what) {
  const transport::Request request = post_request(p2p);
  transport_.wait(std::span(&request, 1), deadline, what);
}

void InFlightTransfers::run_blocking_pair(const PointToPoint& recv, const PointToPoint& send,
                                          transport::Deadline deadline, const std::string& what) {
  // If posting the send throws, the receive stays posted: the caller cancels it (cancel_all)
  // before its buffer goes, as after any failure here.
  std::array<transport::Request, 2> requests{post_request(recv), transport::Request::completed()};
  requests[1] = post_request(send);
  transport_.wait(requests, deadline, what);
}

}  // namespace cohort::comm
