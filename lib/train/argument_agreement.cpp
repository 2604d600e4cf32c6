// See argument_agreement.hpp.

#include "train/argument_agreement.hpp"

#include <cohort/error.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace cohort::train {
namespace {

// A digest never takes this value on the wire: a rank that rejected its arguments sends it.
constexpr std::uint64_t kRejected = 0;

}  // namespace

ArgumentAgreement agree_arguments(Communicator& comm, const Digest& digest, bool rejected,
                                  std::optional<std::chrono::milliseconds> timeout) {
  ArgumentAgreement agreement;
  if (comm.size() == 1) return agreement;
  std::uint64_t mine = rejected ? kRejected : (digest.value() == kRejected ? 1 : digest.value());
  std::vector<std::uint64_t> digests(static_cast<std::size_t>(comm.size()));
  CollectiveOptions options;
  options.timeout = timeout;
  comm.allgather(Buffer::view(&mine, 1, DType::UInt64),
                 Buffer::view(digests.data(), digests.size(), DType::UInt64), options);
  std::optional<std::uint64_t> reference;
  for (std::size_t r = 0; r < digests.size(); ++r) {
    if (digests[r] == kRejected) {
      agreement.rejected.push_back(static_cast<int>(r));
    } else if (!reference) {
      reference = digests[r];
    } else if (digests[r] != *reference) {
      agreement.differ.push_back(static_cast<int>(r));
    }
  }
  return agreement;
}

void throw_if_disagreed(const ArgumentAgreement& agreement, const std::string& op,
                        const std::string& what) {
  if (!agreement.rejected.empty()) {
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("{}: ranks {} rejected their arguments (their errors say why)", op,
                            fmt::join(agreement.rejected, ", ")));
  }
  if (!agreement.differ.empty()) {
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("{}: ranks {} {} differently from the other ranks; every rank must "
                            "pass the same",
                            op, fmt::join(agreement.differ, ", "), what));
  }
}

}  // namespace cohort::train
