// Coordination helpers (include/cohort/train/coordination.hpp).
//
// main_first, how it works:
//   1. The first ranks (rank 0, or every process with local rank 0) run fn, catching what it
//      throws.
//   2. Every rank takes part in a status exchange (lib/train/failure_exchange.hpp): the others
//      wait there for the first ranks, as they would in Accelerate's barrier, but they learn
//      whether fn succeeded. On a failure every rank throws now (its own exception on a failing
//      rank, RemoteError naming the failing ranks elsewhere) and fn runs nowhere else.
//   3. The other ranks run fn.
//   4. With barrier_on_exit, a second exchange makes every rank wait for the others and reports a
//      failure of step 3 on every rank.
// Cost: one allreduce(Max) of 4 bytes per exchange when fn succeeds everywhere.

#include <cohort/error.hpp>
#include <cohort/train/coordination.hpp>

#include "train/failure_exchange.hpp"

#include <fmt/format.h>

#include <cstdint>
#include <exception>
#include <string>
#include <vector>

namespace cohort::train {
namespace {

constexpr const char* kMainFirst = "main_first";

// Trigger::set must be callable from a signal handler.
static_assert(std::atomic<bool>::is_always_lock_free);

bool goes_first(const Communicator& comm, const Environment& env, Scope scope) {
  return scope == Scope::Global ? comm.rank() == 0 : env.local_rank == 0;
}

// One of main_first's status exchanges. A failure of the exchange itself (a timeout while the
// first ranks are still busy, a dead peer) keeps its code and gains the phase in its message.
std::vector<RankFailure> main_first_exchange(Communicator& comm, const std::exception_ptr& own,
                                             std::string_view phase,
                                             const CollectiveOptions& options) {
  const std::optional<std::string> mine =
      own ? std::optional<std::string>(exception_message(own)) : std::nullopt;
  try {
    return exchange_failures(comm, mine, options);
  } catch (const Error& e) {
    throw Error(e.code(), fmt::format("{} ({}): {}", kMainFirst, phase, e.message()));
  }
}

// Writes every line of `text` behind `prefix`, each ended with a newline, in one write and one
// flush.
void write_lines(std::ostream& out, std::string_view text, std::string_view prefix) {
  std::string lines;
  lines.reserve(text.size() + prefix.size() + 1);
  while (true) {
    const std::size_t end = text.find('\n');
    lines.append(prefix);
    lines.append(text.substr(0, end));
    lines.push_back('\n');
    if (end == std::string_view::npos) break;
    text.remove_prefix(end + 1);
  }
  out.write(lines.data(), static_cast<std::streamsize>(lines.size()));
  out.flush();
}

}  // namespace

bool is_main(const Communicator& comm) noexcept {
  return comm.rank() == 0;
}

bool is_local_main(const Environment& env) noexcept {
  return env.local_rank == 0;
}

bool is_last(const Communicator& comm) noexcept {
  return comm.rank() == comm.size() - 1;
}

bool distributed(const Communicator& comm) noexcept {
  return comm.size() > 1;
}

void barrier(Communicator& comm, std::string_view name,
             std::optional<std::chrono::milliseconds> timeout) {
  const std::string who = fmt::format("barrier '{}'", name);
  const CollectiveOptions options = collective_options(who, timeout);
  if (comm.size() == 1) return;
  try {
    comm.barrier(options);
  } catch (const Error& e) {
    throw Error(e.code(), fmt::format("{}: {}", who, e.message()));
  }
}

void main_first(Communicator& comm, const Environment& env, const std::function<void()>& fn,
                const MainFirstOptions& options) {
  const CollectiveOptions collective = collective_options(kMainFirst, options.timeout);
  if (!fn) throw Error(ErrorCode::InvalidArgument, fmt::format("{}: fn is empty", kMainFirst));
  if (comm.size() == 1) {
    fn();
    return;
  }
  const bool first = goes_first(comm, env, options.scope);

  // 1. The first ranks run fn.
  std::exception_ptr error;
  if (first) {
    try {
      fn();
    } catch (...) {
      error = std::current_exception();
    }
  }

  // 2. Everyone learns how it went; the others have waited here for the first ranks.
  const std::vector<RankFailure> failed_first =
      main_first_exchange(comm, error, "waiting for the first ranks' fn", collective);
  if (error) std::rethrow_exception(error);
  if (!failed_first.empty()) {
    throw Error(ErrorCode::RemoteError, failures_message("main_first: fn", failed_first) +
                                            (first ? "" : " (so this rank did not run fn)"));
  }

  // 3. The others run fn; without an exit barrier, what it throws stays on its rank.
  if (!options.barrier_on_exit) {
    if (!first) fn();
    return;
  }
  if (!first) {
    try {
      fn();
    } catch (...) {
      error = std::current_exception();
    }
  }

  // 4. Nobody leaves before everyone ran fn, and a failure of step 3 is reported everywhere.
  const std::vector<RankFailure> failed_others =
      main_first_exchange(comm, error, "waiting for every rank's fn at exit", collective);
  if (error) std::rethrow_exception(error);
  if (!failed_others.empty()) {
    throw Error(ErrorCode::RemoteError, failures_message("main_first: fn", failed_others));
  }
}

bool on_main(const Communicator& comm, const Environment& env, const std::function<void()>& fn,
             Scope scope) {
  if (!fn) throw Error(ErrorCode::InvalidArgument, "on_main: fn is empty");
  if (!goes_first(comm, env, scope)) return false;
  fn();
  return true;
}

void print(const Environment& env, std::string_view text, std::ostream& out, Scope scope) {
  const bool prints = scope == Scope::Global ? env.rank == 0 : env.local_rank == 0;
  if (prints) write_lines(out, text, "");
}

void print_all(const Environment& env, std::string_view text, std::ostream& out) {
  write_lines(out, text, fmt::format("[rank {}] ", env.rank));
}

bool Trigger::check(Communicator& comm, std::optional<std::chrono::milliseconds> timeout) {
  const CollectiveOptions options = collective_options("Trigger::check", timeout);
  // Taking the flag (rather than reading it now and lowering it after the allreduce) keeps a
  // set() that lands during the allreduce raised for the next check instead of erasing it.
  const bool mine = flag_.exchange(false);
  if (comm.size() == 1) return mine;
  std::int32_t raised = mine ? 1 : 0;
  try {
    comm.allreduce(Buffer::view(&raised, 1, DType::Int32), ReduceOp::Sum, options);
  } catch (...) {
    if (mine) flag_.store(true);
    throw;
  }
  return raised > 0;
}

}  // namespace cohort::train
