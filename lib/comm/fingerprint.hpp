#pragma once

// COHORT_DEBUG=detail: before a collective moves data, every rank sends every other rank a
// fingerprint of its call (op, dtype, reduce op, root, count, per-rank counts, host or device
// path). Each rank then
// holds the same table and reaches the same verdict, so a mismatch fails the op on every rank
// with one message naming the ranks and the differing field, instead of a hang or garbage.
//
// Cost: one message of 24 + 16 * size bytes to and from every peer per collective (debug only).

#include <cohort/dtype.hpp>

#include <cohort/algorithm.hpp>
#include "algorithms/op_context.hpp"

#include "algorithms/args.hpp"

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace cohort::comm {

struct Fingerprint {
  Collective kind = Collective::Barrier;
  std::optional<DType> dtype;         ///< unset for barrier
  std::optional<ReduceOp> reduce_op;  ///< set for reducing collectives only
  int root = -1;                      ///< -1 for rootless collectives
  /// Elements per rank for uniform collectives (the count every rank must agree on).
  std::uint64_t count = 0;
  /// v-collectives: the counts array (every rank must pass the same one). alltoallv: this
  /// rank's send counts (checked against the peers' receive counts).
  std::vector<std::uint64_t> counts;
  /// alltoallv only: this rank's receive counts.
  std::vector<std::uint64_t> recv_counts;
  /// The algorithm this rank will try first (forced per op or by COHORT_ALGO; Auto: the table).
  /// Ranks forcing different ones would exchange messages no peer expects.
  Algorithm algorithm = Algorithm::Auto;
  /// Whether this rank runs the op on NCCL (device buffers) rather than the host algorithms.
  /// Each rank decides from its own buffers; ranks deciding differently would each wait for
  /// messages the other path sends. Set by the device path; false for an op that moves nothing
  /// (no path then).
  bool on_device = false;
};

/// What every rank must agree on for one collective, read off its arguments: dtype, reduce op,
/// root, and the per-rank count (uniform forms) or the whole counts array (v-forms; alltoallv:
/// this rank's send and receive counts, checked against its peers').
template <class Args>
Fingerprint fingerprint_of(const Args& args) {
  const auto u64 = [](std::span<const std::size_t> v) {
    return std::vector<std::uint64_t>(v.begin(), v.end());
  };
  Fingerprint fp;
  fp.kind = algorithms::collective_of(args);
  if constexpr (requires { args.dtype; }) fp.dtype = args.dtype;
  if constexpr (requires { args.op; }) fp.reduce_op = args.op;
  if constexpr (requires { args.root; }) fp.root = args.root;
  if constexpr (requires { args.count; }) fp.count = args.count;
  if constexpr (requires { args.variable; }) {
    if (args.variable) {
      fp.counts = u64(args.counts);
    } else {
      fp.count = args.counts.empty() ? 0 : args.counts[0];
    }
  }
  if constexpr (requires { args.uniform; }) {
    if (args.uniform) {
      fp.count = args.send_counts.empty() ? 0 : args.send_counts[0];
    } else {
      fp.counts = u64(args.send_counts);
      fp.recv_counts = u64(args.recv_counts);
    }
  }
  return fp;
}

/// The step tag reserved for the fingerprint exchange. Same-tag messages between a pair match
/// in posting order and each rank posts its fingerprint before any algorithm message of the op,
/// so an algorithm that happens to use this step number too still matches correctly.
inline constexpr std::uint32_t kFingerprintStep = 4095;

/// Exchanges fingerprints among all ranks of `ctx` (within ctx.deadline) and returns, on every
/// rank alike, the mismatch message when they disagree (as find_fingerprint_mismatch), nullopt
/// when they agree. Transport failures propagate as they are, whatever their code: the caller
/// tells the two apart by the return, not by an error's code.
std::optional<std::string> verify_fingerprint(const algorithms::OpContext& ctx,
                                              const Fingerprint& mine);

/// The mismatch message for a full table (index = rank), or nullopt when consistent. Pure, so
/// the comparison is testable without a network. The message does not name the op ("ranks
/// disagree: rank 0 has count=10, rank 2 has count=12"): the error's context does.
std::optional<std::string> find_fingerprint_mismatch(const std::vector<Fingerprint>& table);

/// Wire form: a fixed 16-byte header followed by 2 * size little-endian u64 (zero padded), so
/// every rank's message has the same size even when the ops differ.
std::size_t fingerprint_wire_bytes(int size) noexcept;
void encode_fingerprint(const Fingerprint& fp, int size, std::uint8_t* out);
Fingerprint decode_fingerprint(const std::uint8_t* in, int size);

}  // namespace cohort::comm
