#include "bootstrap/store_protocol.hpp"

#include <cstring>

namespace cohort::bootstrap {
namespace {

void put_u64(std::uint8_t* out, std::uint64_t value) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<std::uint8_t>(value >> (8 * i));
}

std::uint64_t get_u64(const std::uint8_t* in) {
  std::uint64_t value = 0;
  for (int i = 0; i < 8; ++i) value |= static_cast<std::uint64_t>(in[i]) << (8 * i);
  return value;
}

bool is_known_type(std::uint8_t type) {
  return (type >= 1 && type <= 9) || (type >= 0x80 && type <= 0x84);
}

}  // namespace

const char* message_type_name(MessageType type) noexcept {
  switch (type) {
    case MessageType::Hello: return "hello";
    case MessageType::Set: return "set";
    case MessageType::Get: return "get";
    case MessageType::Add: return "add";
    case MessageType::CompareSet: return "compare_set";
    case MessageType::Wait: return "wait";
    case MessageType::Check: return "check";
    case MessageType::Erase: return "erase";
    case MessageType::NumKeys: return "num_keys";
    case MessageType::Ok: return "ok";
    case MessageType::Value: return "value";
    case MessageType::Integer: return "integer";
    case MessageType::Missing: return "missing";
    case MessageType::Failure: return "failure";
  }
  return "unknown";
}

std::uint64_t max_body_bytes(std::size_t max_value_bytes) {
  return 3 * (static_cast<std::uint64_t>(max_value_bytes) + 8);
}

FrameHeader decode_header(const std::uint8_t* bytes, std::uint64_t max_body) {
  const std::uint32_t magic = static_cast<std::uint32_t>(get_u64(bytes) & 0xffffffffu);
  if (magic != kFrameMagic)
    throw Error(ErrorCode::InvalidArgument, "not a cohort store frame (bad magic)");
  if (bytes[4] != kProtocolVersion)
    throw Error(ErrorCode::InvalidArgument,
                "unsupported store protocol version " + std::to_string(bytes[4]));
  if (!is_known_type(bytes[5]))
    throw Error(ErrorCode::InvalidArgument,
                "unknown store message type " + std::to_string(bytes[5]));
  const std::uint64_t body = get_u64(bytes + 8);
  if (body > max_body)
    throw Error(ErrorCode::InvalidArgument, "frame body of " + std::to_string(body) +
                                                " bytes exceeds the limit of " +
                                                std::to_string(max_body));
  return {static_cast<MessageType>(bytes[5]), body};
}

FrameBuilder::FrameBuilder(MessageType type) : frame_(kFrameHeaderBytes, 0) {
  put_u64(frame_.data(), kFrameMagic);  // the upper half overlaps version/type, set next
  frame_[4] = kProtocolVersion;
  frame_[5] = static_cast<std::uint8_t>(type);
  frame_[6] = frame_[7] = 0;
}

FrameBuilder& FrameBuilder::field(std::span<const std::uint8_t> bytes) {
  const std::size_t at = frame_.size();
  frame_.resize(at + 8 + bytes.size());
  put_u64(frame_.data() + at, bytes.size());
  if (!bytes.empty()) std::memcpy(frame_.data() + at + 8, bytes.data(), bytes.size());
  return *this;
}

FrameBuilder& FrameBuilder::field(std::string_view text) {
  return field(std::span(reinterpret_cast<const std::uint8_t*>(text.data()), text.size()));
}

FrameBuilder& FrameBuilder::integer(std::int64_t value) {
  std::uint8_t encoded[8];
  put_u64(encoded, static_cast<std::uint64_t>(value));
  return field(std::span<const std::uint8_t>(encoded, 8));
}

Bytes FrameBuilder::finish() {
  put_u64(frame_.data() + 8, frame_.size() - kFrameHeaderBytes);
  return std::move(frame_);
}

FieldReader::FieldReader(std::span<const std::uint8_t> body, std::size_t max_field)
    : body_(body), max_field_(max_field) {}

std::span<const std::uint8_t> FieldReader::field() {
  if (body_.size() - offset_ < 8)
    throw Error(ErrorCode::InvalidArgument, "store frame ends inside a field length");
  const std::uint64_t length = get_u64(body_.data() + offset_);
  offset_ += 8;
  if (length > max_field_ || length > body_.size() - offset_)
    throw Error(ErrorCode::InvalidArgument, "store frame field of " + std::to_string(length) +
                                                " bytes exceeds the frame or the limit of " +
                                                std::to_string(max_field_));
  const auto result = body_.subspan(offset_, length);
  offset_ += length;
  return result;
}

std::int64_t FieldReader::integer() {
  const auto f = field();
  if (f.size() != 8)
    throw Error(ErrorCode::InvalidArgument,
                "store frame integer field has " + std::to_string(f.size()) + " bytes, expected 8");
  return static_cast<std::int64_t>(get_u64(f.data()));
}

std::vector<std::string> FieldReader::remaining_texts() {
  std::vector<std::string> texts;
  while (!done()) texts.push_back(text());
  return texts;
}

std::string quote_keys(const std::vector<std::string>& keys) {
  std::string text;
  for (const auto& key : keys) {
    if (!text.empty()) text += ", ";
    text += "'" + key + "'";
  }
  return text;
}

}  // namespace cohort::bootstrap
