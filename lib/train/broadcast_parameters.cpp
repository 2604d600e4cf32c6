// broadcast_parameters: the initial-weights broadcast of DDP's _sync_module_states, over the
// public Communicator.
//
// How it works: a model has many small buffers (biases, norms) and a few large ones. Walking the
// parameters in order, small ones (< chunk_bytes) are copied back to back into one byte staging
// buffer on the root; when the next one would not fit, the staging prefix is broadcast and the
// receivers copy each piece out. A parameter of at least chunk_bytes skips the staging copy and is
// broadcast in place, slice by slice. Broadcast moves bytes without interpreting them, so the
// staging buffer is raw bytes and parameters of any dtypes share a chunk.
//
// Cost: one broadcast per chunk and per slice of a large parameter; every small parameter is
// copied twice (into staging on the root, out of it elsewhere), large ones never. Scratch: one
// buffer of min(chunk_bytes, bytes of the small parameters).

#include <cohort/error.hpp>
#include <cohort/train/gradients.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <exception>
#include <string>

#include "train/argument_agreement.hpp"
#include "train/buffer_checks.hpp"

namespace cohort::train {
namespace {

constexpr const char* kBroadcastParameters = "broadcast_parameters";

void check_parameter(std::size_t index, const Buffer& param) {
  const std::string what = fmt::format("parameter {}", index);
  require_host(kBroadcastParameters, what, param);
  require_contiguous(kBroadcastParameters, what, param, /*written=*/true);
}

/// The parameter's bytes as plain host memory (buffer_checks.hpp's host_flat says why: a managed
/// parameter on one rank would take the device path alone), keeping its owner.
Buffer bytes_of(const Buffer& param) {
  return Buffer::view(param.data(), {static_cast<std::int64_t>(param.nbytes())}, DType::UInt8,
                      Device::cpu(), {}, 0, param.owner());
}

}  // namespace

void broadcast_parameters(Communicator& comm, std::span<const Buffer> params, int root,
                          std::size_t chunk_bytes) {
  // Arguments are checked locally, then every rank's layout (and verdict) is compared before a
  // byte moves: ranks that disagree would pair different chunks, or wait on broadcasts the
  // others never start.
  std::size_t small_bytes = 0;
  bool rejected = false;
  std::exception_ptr local_error;
  try {
    if (root < 0 || root >= comm.size()) {
      throw Error(ErrorCode::InvalidArgument,
                  fmt::format("{}: root {} is out of range for a communicator of size {}",
                              kBroadcastParameters, root, comm.size()));
    }
    if (chunk_bytes == 0) {
      throw Error(ErrorCode::InvalidArgument,
                  fmt::format("{}: chunk_bytes must be > 0", kBroadcastParameters));
    }
    for (std::size_t i = 0; i < params.size(); ++i) {
      check_parameter(i, params[i]);
      if (params[i].nbytes() < chunk_bytes) small_bytes += params[i].nbytes();
    }
  } catch (const Error&) {
    rejected = true;
    local_error = std::current_exception();
  }
  Digest digest;
  digest.mix(static_cast<std::uint64_t>(root)).mix(chunk_bytes).mix(params.size());
  for (const Buffer& param : params) digest.mix(param.nbytes());
  const ArgumentAgreement agreement = agree_arguments(comm, digest, rejected, std::nullopt);
  if (local_error) std::rethrow_exception(local_error);
  throw_if_disagreed(agreement, kBroadcastParameters,
                     "passed parameters (count, byte sizes), root or chunk_bytes");
  if (comm.size() == 1) return;

  const bool is_root = comm.rank() == root;
  Buffer staging = Buffer::allocate(std::min(chunk_bytes, small_bytes), DType::UInt8);
  auto* staged = staging.data_as<std::byte>();
  std::vector<std::size_t> members;  // parameters packed into staging, in order
  std::size_t filled = 0;
  const auto flush = [&] {
    if (members.empty()) return;
    if (is_root) {
      std::size_t offset = 0;
      for (std::size_t i : members) {
        std::memcpy(staged + offset, params[i].data(), params[i].nbytes());
        offset += params[i].nbytes();
      }
    }
    comm.broadcast(staging.slice(0, static_cast<std::int64_t>(filled)), root);
    if (!is_root) {
      std::size_t offset = 0;
      for (std::size_t i : members) {
        std::memcpy(params[i].data(), staged + offset, params[i].nbytes());
        offset += params[i].nbytes();
      }
    }
    members.clear();
    filled = 0;
  };

  for (std::size_t i = 0; i < params.size(); ++i) {
    const std::size_t bytes = params[i].nbytes();
    if (bytes == 0) continue;
    if (bytes < chunk_bytes) {
      if (filled + bytes > chunk_bytes) flush();
      members.push_back(i);
      filled += bytes;
      continue;
    }
    // Large: send what is staged first (every rank flushes at the same parameter), then this
    // one in place.
    flush();
    const Buffer whole = bytes_of(params[i]);
    for (std::size_t begin = 0; begin < bytes; begin += chunk_bytes) {
      const std::size_t end = std::min(bytes, begin + chunk_bytes);
      comm.broadcast(whole.slice(static_cast<std::int64_t>(begin), static_cast<std::int64_t>(end)),
                     root);
    }
  }
  flush();
}

}  // namespace cohort::train
