// The status exchange of lib/train/failure_exchange.hpp.
//
// How it works:
//   1. Every rank contributes a flag (1 when its callback threw) to an allreduce(Max). When the
//      result is 0, which is the path every healthy step takes, the exchange ends here.
//   2. Otherwise each rank allgathers one 64-bit word: 0 when it did not fail, 1 + the length of
//      its message when it did (so an empty message still marks a failure).
//   3. The messages are allgathered (allgatherv, one block per failing rank) and split by those
//      lengths, so every rank holds the same list and throws the same text.

#include "train/failure_exchange.hpp"

#include "train/timeout_option.hpp"

#include <cohort/buffer.hpp>
#include <cohort/error.hpp>

#include <fmt/format.h>

#include <cstdint>

namespace cohort::train {

CollectiveOptions collective_options(std::string_view op,
                                     std::optional<std::chrono::milliseconds> timeout) {
  check_timeout_option(op, timeout);
  CollectiveOptions options;
  options.timeout = timeout;
  return options;
}

std::string exception_message(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "an exception that is not a std::exception";
  }
}

std::vector<RankFailure> exchange_failures(Communicator& comm,
                                           const std::optional<std::string>& mine,
                                           const CollectiveOptions& options) {
  if (comm.size() == 1) {
    if (!mine) return {};
    return {RankFailure{comm.rank(), *mine}};
  }

  // 1. Did anyone fail?
  std::int32_t any = mine ? 1 : 0;
  comm.allreduce(Buffer::view(&any, 1, DType::Int32), ReduceOp::Max, options);
  if (any == 0) return {};

  // 2. Who failed, and how long is each message.
  const auto size = static_cast<std::size_t>(comm.size());
  const std::uint64_t word = mine ? 1 + mine->size() : 0;
  std::vector<std::uint64_t> words(size);
  comm.allgather(Buffer::view(&word, 1, DType::UInt64),
                 Buffer::view(words.data(), size, DType::UInt64), options);

  // 3. The messages themselves, back to back in rank order.
  std::vector<std::size_t> lengths(size);
  std::size_t total = 0;
  for (std::size_t r = 0; r < size; ++r) {
    lengths[r] = words[r] == 0 ? 0 : static_cast<std::size_t>(words[r] - 1);
    total += lengths[r];
  }
  std::string text(total, '\0');
  if (total > 0) {
    const std::string_view own = mine ? std::string_view(*mine) : std::string_view();
    comm.allgatherv(Buffer::view(own.data(), own.size(), DType::UInt8),
                    Buffer::view(text.data(), text.size(), DType::UInt8), lengths, options);
  }
  std::vector<RankFailure> failures;
  std::size_t offset = 0;
  for (std::size_t r = 0; r < size; ++r) {
    if (words[r] != 0) failures.push_back({static_cast<int>(r), text.substr(offset, lengths[r])});
    offset += lengths[r];
  }
  return failures;
}

void raise_failures_everywhere(Communicator& comm, const std::exception_ptr& own,
                               std::string_view what, const CollectiveOptions& options) {
  const std::optional<std::string> mine =
      own ? std::optional<std::string>(exception_message(own)) : std::nullopt;
  const std::vector<RankFailure> failures = exchange_failures(comm, mine, options);
  if (own) std::rethrow_exception(own);
  if (!failures.empty()) throw Error(ErrorCode::RemoteError, failures_message(what, failures));
}

std::string failures_message(std::string_view what, const std::vector<RankFailure>& failures) {
  std::string text = fmt::format("{} threw", what);
  for (std::size_t i = 0; i < failures.size(); ++i) {
    text += fmt::format("{} rank {}: {}", i == 0 ? " on" : "; on", failures[i].rank,
                        failures[i].message);
  }
  return text;
}

}  // namespace cohort::train
