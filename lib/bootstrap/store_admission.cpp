#include "bootstrap/store_admission.hpp"

#include <cerrno>

namespace cohort::bootstrap {

std::vector<std::uint64_t> PendingHandshakes::admit(std::uint64_t id, Clock::time_point now) {
  std::vector<std::uint64_t> evicted;
  // Make room first: the capacity counts the newcomer.
  while (deadlines_.size() >= capacity_) {
    evicted.push_back(deadlines_.begin()->first);
    deadlines_.erase(deadlines_.begin());
  }
  deadlines_.emplace(id, now + timeout_);
  return evicted;
}

std::vector<std::uint64_t> PendingHandshakes::expired(Clock::time_point now) const {
  std::vector<std::uint64_t> ids;
  for (const auto& [id, deadline] : deadlines_) {
    if (deadline > now) break;  // later ids were accepted later: their deadlines are later too
    ids.push_back(id);
  }
  return ids;
}

std::optional<Clock::time_point> PendingHandshakes::next_deadline() const {
  if (deadlines_.empty()) return std::nullopt;
  return deadlines_.begin()->second;
}

bool AcceptBackoff::failed(Clock::time_point now) {
  resume_ = now + kAcceptBackoff;
  if (failures_++ > 0) return false;
  first_failure_ = now;
  return true;
}

std::optional<AcceptBackoff::Run> AcceptBackoff::succeeded(Clock::time_point now) {
  if (failures_ == 0) return std::nullopt;
  const Run run{failures_, now - first_failure_};
  failures_ = 0;
  return run;
}

bool lost_before_accept(int err) noexcept {
  switch (err) {
    case EINTR:
    case ECONNABORTED:
    case EPROTO:
    case EPERM:  // a firewall rule refused this connection
    case ENETDOWN:
    case ENOPROTOOPT:
    case EHOSTDOWN:
    case ENONET:
    case EHOSTUNREACH:
    case EOPNOTSUPP:
    case ENETUNREACH: return true;
    default: return false;
  }
}

bool WarningLimiter::allow(Clock::time_point now, std::uint64_t& held_back) {
  if (used_ && now - last_ < kWarningInterval) {
    ++held_back_;
    return false;
  }
  used_ = true;
  last_ = now;
  held_back = held_back_;
  held_back_ = 0;
  return true;
}

std::string held_back_note(std::uint64_t held_back) {
  if (held_back == 0) return {};
  return " (and " + std::to_string(held_back) + " more since the last such warning)";
}

}  // namespace cohort::bootstrap
