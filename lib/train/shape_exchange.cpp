// exchange_inputs: every rank's dtype, shape and agreed arguments, learnt by every rank.
//
// How it works:
//   1. Each rank checks its own buffer (host memory, contiguous) and takes the caller's verdict
//      on its other arguments, and writes a fixed header: {problem, dtype, ndim, args[0],
//      args[1]}.
//   2. The headers are allgathered. If any rank reported a problem, every rank stops here: the
//      failing ranks rethrow their own errors, the others throw one naming them. Nothing else was
//      exchanged, so every rank leaves in step.
//   3. The dimensions are allgatherv'd (rank r contributes its ndim values), unless every rank
//      is 0-d.
// Cost: two small collectives, the second skipped for all-0-d inputs. A world of one checks and
// returns its own input without communicating.

#include "shape_exchange.hpp"

#include <cohort/error.hpp>

#include "buffer_checks.hpp"

#include <fmt/format.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace cohort::train {
namespace {

// Why a rank cannot take part. It travels in the header's first word together with the
// ErrorCode the rank throws (shifted by kCodeShift), so the other ranks throw the same code.
enum class Problem : std::int64_t {
  None = 0,
  DeviceMemory = 1,
  NotContiguous = 2,
  BadArgument = 3,  // the caller's local_error
};
constexpr std::int64_t kCodeShift = 16;

constexpr std::size_t kHeaderWords = 5;

// The error this rank raises itself, and the encoded problem the others learn (0: none).
struct LocalVerdict {
  std::optional<Error> error;
  std::int64_t code = 0;
};

std::int64_t encode(Problem problem, ErrorCode code) {
  return static_cast<std::int64_t>(problem) | (static_cast<std::int64_t>(code) << kCodeShift);
}

// Runs one of buffer_checks.hpp's checks, keeping its error instead of throwing it.
template <class Check>
std::optional<Error> error_of(Check check) {
  try {
    check();
  } catch (const Error& e) {
    return e;
  }
  return std::nullopt;
}

LocalVerdict check_locally(std::string_view op, const Buffer& in,
                           const std::optional<Error>& local_error) {
  if (!in.device().host_accessible()) {
    return {error_of([&] { require_host(op, "the buffer", in); }),
            encode(Problem::DeviceMemory, ErrorCode::Unsupported)};
  }
  if (!in.is_contiguous()) {
    return {error_of([&] { require_contiguous(op, "the buffer", in, /*written=*/false); }),
            encode(Problem::NotContiguous, ErrorCode::InvalidArgument)};
  }
  if (local_error) return {local_error, encode(Problem::BadArgument, local_error->code())};
  return {};
}

std::string describe(int rank, std::int64_t code) {
  switch (static_cast<Problem>(code & ((std::int64_t{1} << kCodeShift) - 1))) {
    case Problem::DeviceMemory:
      return fmt::format("rank {}'s buffer is in device memory (only host memory is supported)",
                         rank);
    case Problem::NotContiguous: return fmt::format("rank {}'s buffer is not contiguous", rank);
    case Problem::BadArgument:
      return fmt::format("rank {} passed an invalid argument (its own error names it)", rank);
    case Problem::None: break;
  }
  return fmt::format("rank {} reported problem code {}", rank, code);
}

}  // namespace

std::string shape_string(const std::vector<std::int64_t>& shape) {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    out += (i > 0 ? ", " : "") + std::to_string(shape[i]);
  }
  return out + "]";
}

std::vector<RankInput> exchange_inputs(Communicator& comm, std::string_view op, const Buffer& in,
                                       std::array<std::int64_t, 2> args,
                                       const std::optional<Error>& local_error) {
  // 1. This rank's own verdict and header.
  const LocalVerdict verdict = check_locally(op, in, local_error);
  if (comm.size() == 1) {
    if (verdict.error) throw *verdict.error;
    return {RankInput{in.dtype(), in.shape(), args}};
  }
  const auto size = static_cast<std::size_t>(comm.size());
  const std::int64_t header[kHeaderWords] = {verdict.code, static_cast<std::int64_t>(in.dtype()),
                                             in.ndim(), args[0], args[1]};

  // 2. Every header everywhere; a problem anywhere ends the call on every rank.
  std::vector<std::int64_t> headers(size * kHeaderWords);
  comm.allgather(Buffer::view(static_cast<const void*>(header), kHeaderWords, DType::Int64),
                 Buffer::view(headers.data(), headers.size(), DType::Int64));
  std::string problems;
  std::optional<ErrorCode> first_code;
  for (std::size_t r = 0; r < size; ++r) {
    const std::int64_t code = headers[r * kHeaderWords];
    if (code == 0) continue;
    if (!first_code) first_code = static_cast<ErrorCode>(code >> kCodeShift);
    problems += (problems.empty() ? "" : "; ") + describe(static_cast<int>(r), code);
  }
  if (verdict.error) throw *verdict.error;
  if (first_code) throw Error(*first_code, fmt::format("{}: {}", op, problems));

  // 3. The dimensions, rank r's ndim values at its offset.
  std::vector<std::size_t> ndims(size);
  std::size_t total = 0;
  for (std::size_t r = 0; r < size; ++r) {
    ndims[r] = static_cast<std::size_t>(headers[r * kHeaderWords + 2]);
    total += ndims[r];
  }
  std::vector<std::int64_t> dims(total);
  if (total > 0) {
    comm.allgatherv(
        Buffer::view(static_cast<const void*>(in.shape().data()), in.shape().size(), DType::Int64),
        Buffer::view(dims.data(), dims.size(), DType::Int64), ndims);
  }

  std::vector<RankInput> inputs(size);
  std::size_t offset = 0;
  for (std::size_t r = 0; r < size; ++r) {
    const std::int64_t* h = &headers[r * kHeaderWords];
    inputs[r].dtype = static_cast<DType>(h[1]);
    inputs[r].shape.assign(dims.begin() + static_cast<std::ptrdiff_t>(offset),
                           dims.begin() + static_cast<std::ptrdiff_t>(offset + ndims[r]));
    inputs[r].args = {h[3], h[4]};
    offset += ndims[r];
  }
  return inputs;
}

}  // namespace cohort::train
