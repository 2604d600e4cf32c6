#pragma once

// 64-bit message tags. Every message a collective sends carries the communicator's tag id, the op's
// sequence number, the step within the op and the sender's rank, so concurrent ops, pipelined
// steps and sub-communicators never match each other's messages. Layout, high to low:
//
//   63     p2p flag (1 = point-to-point: bits 51..20 hold the user's tag instead of seq/step)
//   62..52 the communicator's tag id (11 bits), unique among the live communicators sharing a
//          process's connections (tag_ids.hpp); not its job-wide id, which needs more bits
//   51..32 op sequence number (20 bits, wraps; ops on one communicator run in order, so a wrap
//          could only collide with an op a million calls earlier)
//   31..20 step within the op (12 bits, wraps; same-tag messages from one sender match in order)
//   19..0  source rank (20 bits: up to 1,048,576 ranks)
//
// Algorithms build tags without the source (OpTag); the transport adds its own world rank on send
// and the peer's world rank on receive (sub-communicators share the world's connections).

#include <cstdint>

namespace cohort::transport {

using Tag = std::uint64_t;

inline constexpr int kSourceBits = 20;
inline constexpr int kStepBits = 12;
inline constexpr int kSeqBits = 20;
inline constexpr int kCommBits = 11;
inline constexpr std::uint32_t kMaxRanks = 1u << kSourceBits;
inline constexpr Tag kSourceMask = (Tag{1} << kSourceBits) - 1;
inline constexpr Tag kP2PFlag = Tag{1} << 63;

/// Tag for step `step` of op `seq` on communicator `comm` (source bits zero).
constexpr Tag op_tag(std::uint32_t comm, std::uint32_t seq, std::uint32_t step) noexcept {
  return (Tag{comm & ((1u << kCommBits) - 1)} << 52) | (Tag{seq & ((1u << kSeqBits) - 1)} << 32) |
         (Tag{step & ((1u << kStepBits) - 1)} << kSourceBits);
}

/// Tag for a user point-to-point message with tag `user_tag` (source bits zero).
constexpr Tag p2p_tag(std::uint32_t comm, std::uint32_t user_tag) noexcept {
  return kP2PFlag | (Tag{comm & ((1u << kCommBits) - 1)} << 52) | (Tag{user_tag} << kSourceBits);
}

constexpr Tag with_source(Tag tag, std::uint32_t source) noexcept {
  return (tag & ~kSourceMask) | (Tag{source} & kSourceMask);
}

/// The communicator's tag id in `tag` (tag_ids.hpp).
constexpr std::uint32_t tag_comm(Tag tag) noexcept {
  return static_cast<std::uint32_t>((tag >> 52) & ((1u << kCommBits) - 1));
}
constexpr std::uint32_t tag_source(Tag tag) noexcept {
  return static_cast<std::uint32_t>(tag & kSourceMask);
}
constexpr std::uint32_t tag_step(Tag tag) noexcept {
  return static_cast<std::uint32_t>((tag >> kSourceBits) & ((1u << kStepBits) - 1));
}
/// The user's tag of a point-to-point message's tag (kP2PFlag set).
constexpr std::uint32_t tag_user(Tag tag) noexcept {
  return static_cast<std::uint32_t>((tag >> kSourceBits) & 0xffffffffu);
}
constexpr std::uint32_t tag_seq(Tag tag) noexcept {
  return static_cast<std::uint32_t>((tag >> 32) & ((1u << kSeqBits) - 1));
}

}  // namespace cohort::transport
