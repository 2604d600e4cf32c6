#include "comm/fingerprint.hpp"

#include <cohort/error.hpp>

#include "transport/kept_exchange.hpp"

#include <fmt/format.h>

#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace cohort::comm {
namespace {

// Bytes 0-3: kind, dtype, reduce op, flags and algorithm; 4-7 root; 8-15 count; 16: the path;
// 17-23 zero.
constexpr std::size_t kHeaderBytes = 24;
constexpr std::uint8_t kNone = 0xff;
constexpr std::uint8_t kHasCounts = 1;
constexpr std::uint8_t kHasRecvCounts = 2;
constexpr std::size_t kShownCounts = 16;

void put_u64(std::uint8_t* out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<std::uint8_t>(v >> (8 * i));
}
std::uint64_t get_u64(const std::uint8_t* in) {
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= std::uint64_t{in[i]} << (8 * i);
  return v;
}

std::string dtype_text(const std::optional<DType>& d) {
  return d ? std::string(dtype_name(*d)) : std::string("none");
}
std::string op_text(const std::optional<ReduceOp>& op) {
  return op ? std::string(reduce_op_name(*op)) : std::string("none");
}
std::string counts_text(const std::vector<std::uint64_t>& counts) {
  std::string text = "[";
  for (std::size_t i = 0; i < counts.size() && i < kShownCounts; ++i) {
    if (i) text += ",";
    text += std::to_string(counts[i]);
  }
  if (counts.size() > kShownCounts) text += ",...";
  return text + "]";
}

// "rank 0 has count=10, rank 2 has count=12"
std::string field_mismatch(int r, std::string_view field, const std::string& mine,
                           const std::string& theirs) {
  return fmt::format("ranks disagree: rank 0 has {}={}, rank {} has {}={}", field, mine, r, field,
                     theirs);
}

}  // namespace

std::size_t fingerprint_wire_bytes(int size) noexcept {
  return kHeaderBytes + 16 * static_cast<std::size_t>(size);
}

void encode_fingerprint(const Fingerprint& fp, int size, std::uint8_t* out) {
  std::memset(out, 0, fingerprint_wire_bytes(size));
  out[0] = static_cast<std::uint8_t>(fp.kind);
  out[1] = fp.dtype ? static_cast<std::uint8_t>(*fp.dtype) : kNone;
  out[2] = fp.reduce_op ? static_cast<std::uint8_t>(*fp.reduce_op) : kNone;
  // Bits 0-1: which count arrays follow; bits 2-7: the algorithm.
  out[3] = static_cast<std::uint8_t>((fp.counts.empty() ? 0 : kHasCounts) |
                                     (fp.recv_counts.empty() ? 0 : kHasRecvCounts) |
                                     (static_cast<unsigned>(fp.algorithm) << 2));
  const auto root = static_cast<std::uint32_t>(fp.root);
  for (int i = 0; i < 4; ++i) out[4 + i] = static_cast<std::uint8_t>(root >> (8 * i));
  put_u64(out + 8, fp.count);
  out[16] = fp.on_device ? 1 : 0;
  const auto n = static_cast<std::size_t>(size);
  for (std::size_t i = 0; i < fp.counts.size() && i < n; ++i)
    put_u64(out + kHeaderBytes + 8 * i, fp.counts[i]);
  for (std::size_t i = 0; i < fp.recv_counts.size() && i < n; ++i)
    put_u64(out + kHeaderBytes + 8 * (n + i), fp.recv_counts[i]);
}

Fingerprint decode_fingerprint(const std::uint8_t* in, int size) {
  Fingerprint fp;
  if (in[0] > static_cast<std::uint8_t>(Collective::Recv)) {
    throw Error(ErrorCode::Internal,
                fmt::format("fingerprint with unknown op kind {} received", in[0]));
  }
  fp.kind = static_cast<Collective>(in[0]);
  if (in[1] != kNone) fp.dtype = static_cast<DType>(in[1]);
  if (in[2] != kNone) fp.reduce_op = static_cast<ReduceOp>(in[2]);
  std::uint32_t root = 0;
  for (int i = 0; i < 4; ++i) root |= std::uint32_t{in[4 + i]} << (8 * i);
  fp.root = static_cast<int>(root);
  fp.count = get_u64(in + 8);
  fp.algorithm = static_cast<Algorithm>(in[3] >> 2);
  fp.on_device = in[16] != 0;
  const auto n = static_cast<std::size_t>(size);
  if (in[3] & kHasCounts) {
    fp.counts.resize(n);
    for (std::size_t i = 0; i < n; ++i) fp.counts[i] = get_u64(in + kHeaderBytes + 8 * i);
  }
  if (in[3] & kHasRecvCounts) {
    fp.recv_counts.resize(n);
    for (std::size_t i = 0; i < n; ++i)
      fp.recv_counts[i] = get_u64(in + kHeaderBytes + 8 * (n + i));
  }
  return fp;
}

namespace {

/// Last of the checks: with equal arguments, ranks may still have taken different paths (one
/// rank's buffers in host memory, the others' on a device); a count mismatch says more.
std::optional<std::string> path_mismatch(const std::vector<Fingerprint>& table) {
  const Fingerprint& ref = table[0];
  const auto path = [](bool device) {
    return std::string(device ? "device buffers (NCCL)" : "host buffers (host algorithms)");
  };
  for (std::size_t r = 1; r < table.size(); ++r) {
    if (table[r].on_device != ref.on_device) {
      return fmt::format(
          "ranks disagree: rank 0 passed {}, rank {} passed {}; an op's buffers must be on a CUDA "
          "device on every rank or in host memory on every rank (an empty CUDA tensor counts as "
          "on the device)",
          path(ref.on_device), r, path(table[r].on_device));
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> find_fingerprint_mismatch(const std::vector<Fingerprint>& table) {
  if (table.empty()) return std::nullopt;
  const Fingerprint& ref = table[0];
  const int n = static_cast<int>(table.size());
  // Field by field, so the message names the most fundamental disagreement first.
  for (int r = 1; r < n; ++r) {
    if (table[r].kind != ref.kind) {
      return fmt::format("ranks disagree: rank 0 called {}, rank {} called {}",
                         collective_name(ref.kind), r, collective_name(table[r].kind));
    }
  }
  for (int r = 1; r < n; ++r) {
    if (table[r].dtype != ref.dtype)
      return field_mismatch(r, "dtype", dtype_text(ref.dtype), dtype_text(table[r].dtype));
  }
  for (int r = 1; r < n; ++r) {
    if (table[r].reduce_op != ref.reduce_op) {
      return field_mismatch(r, "op", op_text(ref.reduce_op), op_text(table[r].reduce_op));
    }
  }
  for (int r = 1; r < n; ++r) {
    if (table[r].root != ref.root) {
      return field_mismatch(r, "root", std::to_string(ref.root), std::to_string(table[r].root));
    }
  }
  for (int r = 1; r < n; ++r) {
    // A device op names no algorithm: against a host op's forced one, the path is what differs.
    if (table[r].on_device != ref.on_device) continue;
    if (table[r].algorithm != ref.algorithm) {
      return field_mismatch(r, "algorithm", std::string(algorithm_name(ref.algorithm)),
                            std::string(algorithm_name(table[r].algorithm)));
    }
  }
  for (int r = 1; r < n; ++r) {
    if (table[r].count != ref.count) {
      return field_mismatch(r, "count", std::to_string(ref.count), std::to_string(table[r].count));
    }
  }
  if (ref.kind == Collective::Alltoallv) {
    // What rank i sends to j must be what j expects from i.
    for (int i = 0; i < n; ++i) {
      for (int j = 0; j < n; ++j) {
        const auto sent = table[i].counts.empty() ? 0 : table[i].counts[j];
        const auto expected = table[j].recv_counts.empty() ? 0 : table[j].recv_counts[i];
        if (sent != expected) {
          return fmt::format(
              "ranks disagree: rank {} sends {} elements to rank {}, but rank {} expects {} from "
              "rank {}",
              i, sent, j, j, expected, i);
        }
      }
    }
    return path_mismatch(table);
  }
  for (int r = 1; r < n; ++r) {
    if (table[r].counts != ref.counts) {
      return field_mismatch(r, "counts", counts_text(ref.counts), counts_text(table[r].counts));
    }
  }
  return path_mismatch(table);
}

std::optional<std::string> verify_fingerprint(const algorithms::OpContext& ctx,
                                              const Fingerprint& mine) {
  if (ctx.size == 1) return std::nullopt;
  const std::size_t record = fingerprint_wire_bytes(ctx.size);
  // Kept by the transport should the exchange fail (transport/kept_exchange.hpp).
  auto table =
      std::make_shared<std::vector<std::uint8_t>>(record * static_cast<std::size_t>(ctx.size));
  std::uint8_t* own = table->data() + record * static_cast<std::size_t>(ctx.rank);
  encode_fingerprint(mine, ctx.size, own);

  const transport::Tag tag = ctx.tag(kFingerprintStep);
  transport::exchange_keeping(
      ctx.transport, tag, table,
      [&](std::vector<transport::Request>& requests) {
        requests.reserve(2 * static_cast<std::size_t>(ctx.size));
        for (int peer = 0; peer < ctx.size; ++peer) {
          if (peer == ctx.rank) continue;
          requests.push_back(ctx.transport.post_recv(
              peer, table->data() + record * static_cast<std::size_t>(peer), record, tag));
        }
        for (int peer = 0; peer < ctx.size; ++peer) {
          if (peer == ctx.rank) continue;
          requests.push_back(ctx.transport.post_send(peer, own, record, tag));
        }
      },
      ctx.deadline, ctx.what + " (debug fingerprint exchange)");

  std::vector<Fingerprint> decoded;
  decoded.reserve(static_cast<std::size_t>(ctx.size));
  for (int r = 0; r < ctx.size; ++r)
    decoded.push_back(
        decode_fingerprint(table->data() + record * static_cast<std::size_t>(r), ctx.size));
  return find_fingerprint_mismatch(decoded);
}

}  // namespace cohort::comm
