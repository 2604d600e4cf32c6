#pragma once

// The TcpStore wire format. Every message, request or reply, is one frame:
//
//   header (16 bytes, little-endian):
//     u32 magic = 0x54534843 ("CHST")   u8 version = 1   u8 type   u16 reserved = 0
//     u64 body_length
//   body: fields, each u64 length (little-endian) followed by that many bytes.
//
// Integers travel as 8-byte little-endian fields. A receiver validates the header before
// allocating anything: a wrong magic/version, or a body longer than max_body_bytes(), drops the
// connection. Each field is further bounded by max_value_bytes. The first request on a
// connection must be Hello carrying the token (body at most 64 KiB); anything else is refused.

#include <cohort/error.hpp>
#include <cohort/store.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace cohort::bootstrap {

inline constexpr std::uint32_t kFrameMagic = 0x54534843u;
inline constexpr std::uint8_t kProtocolVersion = 1;
inline constexpr std::size_t kFrameHeaderBytes = 16;

/// The longest a get()/wait() waits. A longer timeout (milliseconds::max() for "as long as it
/// takes") is cut to this on both ends, so no deadline computed as now + timeout overflows.
inline constexpr std::chrono::hours kMaxWaitTimeout{24 * 365};

enum class MessageType : std::uint8_t {
  // Requests.
  Hello = 1,       // [token]
  Set = 2,         // [key, value]
  Get = 3,         // [timeout_ms, key]                -> Value | Missing
  Add = 4,         // [key, delta]                     -> Integer
  CompareSet = 5,  // [key, expected, desired]         -> Value
  Wait = 6,        // [timeout_ms, key...]             -> Ok | Missing
  Check = 7,       // [key...]                         -> Integer (0 or 1)
  Erase = 8,       // [key]                            -> Integer (0 or 1)
  NumKeys = 9,     // []                               -> Integer
  // Replies.
  Ok = 0x80,       // []
  Value = 0x81,    // [value]
  Integer = 0x82,  // [i64]
  Missing = 0x83,  // [key...] the keys still absent when the deadline passed
  Failure = 0x84,  // [error code, message]
};

const char* message_type_name(MessageType type) noexcept;

struct FrameHeader {
  MessageType type;
  std::uint64_t body_length;
};

/// Largest body a peer may send: compare_set carries a key and two values, each up to
/// max_value_bytes, plus their length prefixes.
std::uint64_t max_body_bytes(std::size_t max_value_bytes);

/// Parses the 16 header bytes. Throws Error(InvalidArgument) for a bad magic, version or type,
/// or a body longer than `max_body` (checked before the caller allocates the body).
FrameHeader decode_header(const std::uint8_t* bytes, std::uint64_t max_body);

/// Builds one frame: header then fields.
class FrameBuilder {
 public:
  explicit FrameBuilder(MessageType type);
  FrameBuilder& field(std::span<const std::uint8_t> bytes);
  FrameBuilder& field(std::string_view text);
  FrameBuilder& integer(std::int64_t value);
  /// The finished frame (header's body length filled in); the builder is left empty.
  Bytes finish();

 private:
  Bytes frame_;
};

/// Reads the fields of a received body in order. Throws Error(InvalidArgument) when the body is
/// malformed or a field is longer than `max_field`.
class FieldReader {
 public:
  FieldReader(std::span<const std::uint8_t> body, std::size_t max_field);
  bool done() const { return offset_ == body_.size(); }
  std::span<const std::uint8_t> field();
  std::string text() { return to_string(field()); }
  Bytes bytes() {
    auto f = field();
    return Bytes(f.begin(), f.end());
  }
  std::int64_t integer();
  /// Every remaining field, as text.
  std::vector<std::string> remaining_texts();

  static std::string to_string(std::span<const std::uint8_t> bytes) {
    return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  }

 private:
  std::span<const std::uint8_t> body_;
  std::size_t offset_ = 0;
  std::size_t max_field_;
};

/// "'a', 'b'" for messages naming keys.
std::string quote_keys(const std::vector<std::string>& keys);

}  // namespace cohort::bootstrap
