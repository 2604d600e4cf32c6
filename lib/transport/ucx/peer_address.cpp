#include "transport/ucx/peer_address.hpp"

#include <cohort/error.hpp>

#include <climits>
#include <cstring>
#include <iterator>

namespace cohort::transport::ucx {
namespace {

constexpr std::uint32_t kMagic = 0x43485544;  // cohort UCX address, version 4 (CPU sets)

void put_u32(std::vector<std::uint8_t>& out, std::uint32_t value) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<std::uint8_t>(value >> (8 * i)));
}

void put_u64(std::vector<std::uint8_t>& out, std::uint64_t value) {
  put_u32(out, static_cast<std::uint32_t>(value));
  put_u32(out, static_cast<std::uint32_t>(value >> 32));
}

std::uint32_t get_u32(const std::uint8_t* in) {
  std::uint32_t value = 0;
  for (int i = 0; i < 4; ++i) value |= std::uint32_t{in[i]} << (8 * i);
  return value;
}

}  // namespace

std::vector<std::uint8_t> encode_peer_address(const PeerAddress& address) {
  std::vector<std::uint8_t> out;
  put_u32(out, kMagic);
  put_u32(out, address.pid);
  put_u32(out, static_cast<std::uint32_t>(address.fastbox_fd));
  put_u64(out, address.probe_at);
  put_u64(out, address.probe);
  put_u32(out, static_cast<std::uint32_t>(address.cpus.size()));
  for (const std::uint64_t word : address.cpus) put_u64(out, word);
  put_u32(out, static_cast<std::uint32_t>(address.host_identity.size()));
  out.insert(out.end(), address.host_identity.begin(), address.host_identity.end());
  put_u32(out, static_cast<std::uint32_t>(address.worker_address.size()));
  out.insert(out.end(), address.worker_address.begin(), address.worker_address.end());
  return out;
}

PeerAddress decode_peer_address(const std::vector<std::uint8_t>& bytes, int rank) {
  const auto bad = [rank](const char* why) {
    return Error(ErrorCode::Internal, "malformed transport address published by rank " +
                                          std::to_string(rank) + ": " + why);
  };
  std::size_t at = 0;
  const auto read_u32 = [&]() {
    if (bytes.size() - at < 4) throw bad("truncated");
    const std::uint32_t value = get_u32(bytes.data() + at);
    at += 4;
    return value;
  };
  if (read_u32() != kMagic) throw bad("wrong magic (another cohort version?)");
  PeerAddress address;
  address.pid = read_u32();
  address.fastbox_fd = static_cast<std::int32_t>(read_u32());
  const auto read_u64 = [&]() {
    const std::uint64_t low = read_u32();
    return low | std::uint64_t{read_u32()} << 32;
  };
  address.probe_at = read_u64();
  address.probe = read_u64();
  const std::uint32_t cpu_words = read_u32();
  if ((bytes.size() - at) / 8 < cpu_words) throw bad("truncated CPU set");
  address.cpus.resize(cpu_words);
  for (std::uint64_t& word : address.cpus) word = read_u64();
  const std::uint32_t identity_size = read_u32();
  if (bytes.size() - at < identity_size) throw bad("truncated host identity");
  address.host_identity.assign(bytes.begin() + static_cast<std::ptrdiff_t>(at),
                               bytes.begin() + static_cast<std::ptrdiff_t>(at + identity_size));
  at += identity_size;
  const std::uint32_t worker_size = read_u32();
  if (bytes.size() - at != worker_size || worker_size == 0) throw bad("bad worker address size");
  address.worker_address.assign(bytes.begin() + static_cast<std::ptrdiff_t>(at), bytes.end());
  return address;
}

}  // namespace cohort::transport::ucx
