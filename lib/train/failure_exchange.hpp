#pragma once

// How the training layer keeps a throwing callback from hanging the other ranks. Helpers that run
// caller code on some ranks and then communicate (main_first, compute_and_broadcast,
// reduce_and_broadcast) catch the callback's exception, take part in one status exchange, and only
// then throw: the failing rank its own exception, every other rank a RemoteError naming the failing
// ranks and their messages. Without the exchange, a rank whose callback threw would leave the
// collective its peers are already waiting in, and they would wait until the timeout.
//
// Cost of the exchange: one allreduce(Max) of a 4-byte flag when every rank succeeded; only when
// one failed, an allgather of 8 bytes per rank and an allgatherv of the messages.

#include <cohort/communicator.hpp>

#include <chrono>
#include <exception>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cohort::train {

struct RankFailure {
  int rank = 0;
  std::string message;
};

/// The options for a helper's collectives: `timeout` (unset: the communicator's default). Throws
/// InvalidArgument naming `op` and the value when check_timeout_option refuses the timeout.
CollectiveOptions collective_options(std::string_view op,
                                     std::optional<std::chrono::milliseconds> timeout);

/// what() of the exception, or a fixed text for one that is not a std::exception.
std::string exception_message(const std::exception_ptr& error);

/// Collective over `comm` (no communication in a world of one): every rank passes its own
/// failure's message, or nullopt, and gets every rank's failure in rank order. The messages
/// travel only when some rank failed.
std::vector<RankFailure> exchange_failures(Communicator& comm,
                                           const std::optional<std::string>& mine,
                                           const CollectiveOptions& options);

/// Collective: exchange_failures of `own`'s message, then, when any rank failed, this rank
/// rethrows `own` if it is set and otherwise throws RemoteError
/// "<what> threw on rank 2: <message>" (every failing rank is listed). Returns when none failed.
void raise_failures_everywhere(Communicator& comm, const std::exception_ptr& own,
                               std::string_view what, const CollectiveOptions& options);

/// The text of the RemoteError a rank throws for other ranks' failures:
/// "<what> threw on rank 0: <message>", or "<what> threw on rank 0: <m0>; on rank 3: <m3>" when
/// several failed.
std::string failures_message(std::string_view what, const std::vector<RankFailure>& failures);

}  // namespace cohort::train
