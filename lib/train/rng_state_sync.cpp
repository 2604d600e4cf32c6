// RngStateSync: Accelerate's synchronize_rng_states for generators cohort does not own.
//
// How it works (every step is collective, and every decision is taken from exchanged data so all
// ranks take the same branch):
//   1. The root reads the states it was asked for and broadcasts a plan: a status, its requested
//      names and each state's size (a length first, then the encoded plan).
//   2. If the root's getter threw, every rank stops here: the root rethrows its own error, the
//      others throw RemoteError naming the root and the generator.
//   3. Each rank checks its own request against the plan (same names, no duplicates, every name
//      registered) and writes down what is wrong. The reports' lengths are allgathered; if any is
//      non-zero the reports themselves are allgathered and every rank throws the same
//      InvalidArgument naming the ranks and names, before any state moves.
//   4. The root broadcasts the concatenated states once; every rank, the root included, installs
//      them in the plan's order.
//   5. A failure flag per rank is allgathered, so a throwing setter is an error on every rank
//      instead of a silent divergence.
// A world of one runs the same steps without communicating.
//
// Cost: two broadcasts of a few bytes per name, two allgathers of 8 and 4 bytes per rank, one
// broadcast of the states; the allgatherv of the reports runs only on a mismatch.
//
// The plan and the reports travel in native byte order: every rank of a job runs on the same
// architecture, as the rest of cohort's host path already assumes.

#include <cohort/buffer.hpp>
#include <cohort/error.hpp>
#include <cohort/train/objects.hpp>
#include <cohort/train/random.hpp>

#include "train/byte_codec.hpp"
#include "train/failure_exchange.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cohort::train {
namespace {

constexpr const char* kRngStateSync = "RngStateSync::synchronize";

// ---- Encoding of the root's plan (lib/train/byte_codec.hpp).

enum class PlanStatus : std::uint8_t {
  Ready = 0,         // states read; sizes valid
  NotRead = 1,       // the root's own request is invalid; step 3 reports why
  GetterFailed = 2,  // a getter threw on the root; `failure` says which and why
};

struct Plan {
  PlanStatus status = PlanStatus::Ready;
  std::vector<std::string> names;
  std::vector<std::uint64_t> sizes;  // one per name (zeros unless Ready)
  std::string failure;
};

std::vector<std::byte> encode(const Plan& plan) {
  ByteWriter w;
  w.u8(static_cast<std::uint8_t>(plan.status));
  w.u64(plan.names.size());
  for (std::size_t i = 0; i < plan.names.size(); ++i) {
    w.text(plan.names[i]);
    w.u64(plan.sizes[i]);
  }
  w.text(plan.failure);
  return w.take();
}

Plan decode(std::span<const std::byte> bytes) {
  ByteReader r(bytes, std::string(kRngStateSync) + ": the root's plan");
  Plan plan;
  const std::uint8_t status = r.u8();
  if (status > static_cast<std::uint8_t>(PlanStatus::GetterFailed)) {
    throw Error(ErrorCode::Internal, std::string(kRngStateSync) + ": the root's plan has status " +
                                         std::to_string(status));
  }
  plan.status = static_cast<PlanStatus>(status);
  // No reserve from the count: every name consumes at least 16 bytes or throws, so a corrupt
  // count cannot make this loop (or an allocation) larger than the plan itself.
  const std::uint64_t count = r.u64();
  for (std::uint64_t i = 0; i < count; ++i) {
    plan.names.push_back(r.text());
    plan.sizes.push_back(r.u64());
  }
  plan.failure = r.text();
  if (!r.done()) {
    throw Error(ErrorCode::Internal,
                std::string(kRngStateSync) + ": the root's plan has trailing bytes");
  }
  return plan;
}

// ---- Messages.

std::string quoted(const std::string& name) {
  return "'" + name + "'";
}

std::string list(const std::vector<std::string>& names) {
  std::string out = "[";
  for (std::size_t i = 0; i < names.size(); ++i) out += (i > 0 ? ", " : "") + quoted(names[i]);
  return out + "]";
}

std::string ranks_list(const std::vector<int>& ranks) {
  std::string out;
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    out += (i > 0 ? ", " : "") + std::to_string(ranks[i]);
  }
  return out;
}

// ---- Communication. Each helper is a no-op in a world of one, where the root's data is already
// everything there is.

// Every rank's report, in rank order, on every rank. A report is empty when all is well, so the
// texts themselves travel only when some rank has something to say.
std::vector<std::string> allgather_reports(Communicator& comm, const std::string& mine) {
  if (comm.size() == 1) return {mine};
  const auto size = static_cast<std::size_t>(comm.size());
  std::uint64_t length = mine.size();
  std::vector<std::uint64_t> lengths(size);
  comm.allgather(Buffer::view(&length, 1, DType::UInt64),
                 Buffer::view(lengths.data(), size, DType::UInt64));
  std::vector<std::string> reports(size);
  if (std::all_of(lengths.begin(), lengths.end(), [](std::uint64_t n) { return n == 0; })) {
    return reports;
  }
  const std::vector<std::size_t> counts(lengths.begin(), lengths.end());
  std::size_t total = 0;
  for (std::size_t n : counts) total += n;
  std::string text(total, '\0');
  comm.allgatherv(Buffer::view(mine.data(), mine.size(), DType::UInt8),
                  Buffer::view(text.data(), text.size(), DType::UInt8), counts);
  std::size_t offset = 0;
  for (std::size_t r = 0; r < size; ++r) {
    reports[r] = text.substr(offset, counts[r]);
    offset += counts[r];
  }
  return reports;
}

// The ranks whose flag is set, in order, on every rank.
std::vector<int> allgather_failed_ranks(Communicator& comm, bool failed) {
  std::vector<std::int32_t> flags(static_cast<std::size_t>(comm.size()), 0);
  std::int32_t mine = failed ? 1 : 0;
  if (comm.size() == 1) {
    flags[0] = mine;
  } else {
    comm.allgather(Buffer::view(&mine, 1, DType::Int32),
                   Buffer::view(flags.data(), flags.size(), DType::Int32));
  }
  std::vector<int> ranks;
  for (std::size_t r = 0; r < flags.size(); ++r) {
    if (flags[r] != 0) ranks.push_back(static_cast<int>(r));
  }
  return ranks;
}

// What is wrong with `rank`'s request, measured against the root's: "" when nothing is.
// `registered` is the rank's sorted generator names.
std::string mismatch_report(int rank, const std::vector<std::string>& request,
                            const std::vector<std::string>& root_request,
                            const std::vector<std::string>& registered) {
  std::vector<std::string> problems;
  std::vector<std::string> sorted = request;
  std::sort(sorted.begin(), sorted.end());
  const auto duplicate = std::adjacent_find(sorted.begin(), sorted.end());
  if (duplicate != sorted.end()) problems.push_back("names " + quoted(*duplicate) + " twice");
  // The same names in another order are fine: every rank installs in the root's order.
  std::vector<std::string> root_sorted = root_request;
  std::sort(root_sorted.begin(), root_sorted.end());
  if (sorted != root_sorted) problems.push_back("asked for " + list(request));
  std::vector<std::string> missing;
  for (const std::string& name : root_request) {
    if (!std::binary_search(registered.begin(), registered.end(), name)) missing.push_back(name);
  }
  if (!missing.empty()) problems.push_back("has no generator " + list(missing));

  std::string report;
  for (const std::string& problem : problems) {
    report += (report.empty() ? "rank " + std::to_string(rank) + " " : ", ") + problem;
  }
  return report;
}

}  // namespace

void RngStateSync::add(const std::string& name, Getter get, Setter set) {
  if (name.empty()) {
    throw Error(ErrorCode::InvalidArgument, "RngStateSync::add: the generator name is empty");
  }
  if (!get || !set) {
    throw Error(ErrorCode::InvalidArgument, "RngStateSync::add: generator " + quoted(name) +
                                                " has an empty " + (get ? "setter" : "getter"));
  }
  entries_[name] = Entry{std::move(get), std::move(set)};
}

void RngStateSync::remove(const std::string& name) {
  if (entries_.erase(name) == 0) {
    throw Error(ErrorCode::InvalidArgument,
                "RngStateSync::remove: no generator " + quoted(name) + " is registered");
  }
}

std::vector<std::string> RngStateSync::names() const {
  std::vector<std::string> out;
  out.reserve(entries_.size());
  for (const auto& [name, entry] : entries_) out.push_back(name);
  return out;
}

void RngStateSync::synchronize(Communicator& comm, const std::vector<std::string>& names,
                               int root) {
  if (root < 0 || root >= comm.size()) {
    throw Error(ErrorCode::InvalidArgument,
                std::string(kRngStateSync) + ": root " + std::to_string(root) +
                    " is out of range for a world of " + std::to_string(comm.size()));
  }
  const std::vector<std::string> registered = this->names();
  const std::vector<std::string> request = names.empty() ? registered : names;
  const bool is_root = comm.rank() == root;

  // 1. The root reads its states, unless its own request is unsound (step 3 will say why), and
  //    broadcasts the plan.
  Plan plan;
  std::vector<std::byte> states;
  std::exception_ptr root_error;
  if (is_root) {
    plan.names = request;
    plan.sizes.assign(request.size(), 0);
    if (!mismatch_report(root, request, request, registered).empty()) {
      plan.status = PlanStatus::NotRead;
    } else {
      std::size_t i = 0;
      try {
        for (; i < request.size(); ++i) {
          const std::vector<std::byte> state = entries_.at(request[i]).get();
          plan.sizes[i] = state.size();
          states.insert(states.end(), state.begin(), state.end());
        }
      } catch (...) {
        root_error = std::current_exception();
        plan.status = PlanStatus::GetterFailed;
        plan.failure = "generator " + quoted(request[i]) + ": " + exception_message(root_error);
      }
    }
  }
  std::vector<std::byte> encoded = is_root ? encode(plan) : std::vector<std::byte>{};
  broadcast_bytes(comm, encoded, root);
  if (!is_root) plan = decode(encoded);

  // 2. A getter that threw on the root ends the call on every rank.
  if (plan.status == PlanStatus::GetterFailed) {
    if (is_root) std::rethrow_exception(root_error);
    throw Error(ErrorCode::RemoteError, std::string(kRngStateSync) + ": root " +
                                            std::to_string(root) + " failed to read " +
                                            plan.failure);
  }

  // 3. Every rank checks its request against the root's; any problem fails every rank alike.
  const std::vector<std::string> reports =
      allgather_reports(comm, mismatch_report(comm.rank(), request, plan.names, registered));
  std::string problems;
  for (const std::string& report : reports) {
    if (!report.empty()) problems += (problems.empty() ? "" : "; ") + report;
  }
  if (!problems.empty()) {
    throw Error(ErrorCode::InvalidArgument,
                std::string(kRngStateSync) +
                    ": the ranks disagree on the generators to synchronize (root " +
                    std::to_string(root) + " asked for " + list(plan.names) + "): " + problems);
  }

  // 4. The states travel once, their total length known everywhere from the plan; every rank,
  //    the root included, installs them in the plan's order.
  if (!is_root) {
    std::size_t total = 0;
    for (std::uint64_t size : plan.sizes) total += static_cast<std::size_t>(size);
    states.resize(total);
  }
  if (comm.size() > 1 && !states.empty()) {
    comm.broadcast(Buffer::view(states.data(), states.size(), DType::UInt8), root);
  }
  std::exception_ptr set_error;
  try {
    std::span<const std::byte> rest(states);
    for (std::size_t i = 0; i < plan.names.size(); ++i) {
      const auto size = static_cast<std::size_t>(plan.sizes[i]);
      entries_.at(plan.names[i]).set(rest.first(size));
      rest = rest.subspan(size);
    }
  } catch (...) {
    set_error = std::current_exception();
  }

  // 5. A setter that threw is an error on every rank, so none carries on out of step unaware.
  const std::vector<int> failed = allgather_failed_ranks(comm, set_error != nullptr);
  if (set_error) std::rethrow_exception(set_error);
  if (!failed.empty()) {
    throw Error(ErrorCode::RemoteError,
                std::string(kRngStateSync) + ": a state setter threw on rank(s) " +
                    ranks_list(failed) + "; this rank installed every state");
  }
}

}  // namespace cohort::train
