// libFuzzer harness: the TcpStore frame codec (lib/bootstrap/store_protocol.hpp) on arbitrary
// bytes.
//
// Input: one byte choosing the per-field limit (a power of two, so inputs reach both sides of it),
// then a frame as it would arrive on a socket. A truncated body is read as far as it goes, which a
// receiver never does, to drive the field reader into every short-input path.
//
// Invariants:
// - decode_header throws Error(InvalidArgument) or returns a known type and a body length within
//   max_body_bytes(limit);
// - the field reader throws Error(InvalidArgument) or returns fields inside the body, each within
//   the limit, that tile the body exactly;
// - a complete frame whose fields all parse re-encodes (FrameBuilder) to the same bytes, except
//   the two reserved header bytes, which the builder writes as zero and the decoder ignores; the
//   re-encoded frame parses back to the same fields, 8-byte fields read back as the little-endian
//   integers they spell.

#include "bootstrap/store_protocol.hpp"
#include "fuzz_check.hpp"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

using namespace cohort;
using namespace cohort::bootstrap;
using cohort::fuzz::require_invalid_argument;

namespace {

// Independent of store_protocol.cpp's own helper, so a bug there cannot hide itself.
std::uint64_t little_endian(std::span<const std::uint8_t> bytes) {
  std::uint64_t value = 0;
  for (std::size_t i = bytes.size(); i-- > 0;) value = (value << 8) | bytes[i];
  return value;
}

std::vector<std::span<const std::uint8_t>> read_fields(std::span<const std::uint8_t> body,
                                                       std::size_t max_field) {
  std::vector<std::span<const std::uint8_t>> fields;
  FieldReader reader(body, max_field);
  while (!reader.done()) fields.push_back(reader.field());
  return fields;
}

void check_round_trip(MessageType type, std::span<const std::uint8_t> frame,
                      const std::vector<std::span<const std::uint8_t>>& fields,
                      std::size_t max_field) {
  FrameBuilder builder(type);
  for (const auto& f : fields) builder.field(f);
  const Bytes encoded = builder.finish();
  FUZZ_REQUIRE(encoded.size() == frame.size(), "re-encoded frame has " +
                                                   std::to_string(encoded.size()) + " bytes, the " +
                                                   "input " + std::to_string(frame.size()));
  FUZZ_REQUIRE(std::equal(encoded.begin(), encoded.begin() + 6, frame.begin()),
               "re-encoded magic, version or type differ");
  FUZZ_REQUIRE(encoded[6] == 0 && encoded[7] == 0, "the builder wrote non-zero reserved bytes");
  FUZZ_REQUIRE(std::equal(encoded.begin() + 8, encoded.end(), frame.begin() + 8),
               "re-encoded body length or body differ");

  const FrameHeader again = decode_header(encoded.data(), max_body_bytes(max_field));
  FUZZ_REQUIRE(again.type == type, "type changed across the round trip");
  FUZZ_REQUIRE(again.body_length == encoded.size() - kFrameHeaderBytes,
               "body length changed across the round trip");
  FieldReader reader(std::span(encoded).subspan(kFrameHeaderBytes), max_field);
  for (const auto& f : fields) {
    if (f.size() == 8) {
      const std::int64_t value = reader.integer();
      FUZZ_REQUIRE(static_cast<std::uint64_t>(value) == little_endian(f),
                   "integer field reads back as " + std::to_string(value));
    } else {
      const std::string text = reader.text();
      FUZZ_REQUIRE(text.size() == f.size() && std::equal(text.begin(), text.end(), f.begin(),
                                                         [](char a, std::uint8_t b) {
                                                           return static_cast<std::uint8_t>(a) == b;
                                                         }),
                   "text field changed across the round trip");
    }
  }
  FUZZ_REQUIRE(reader.done(), "the re-encoded frame has more fields than the input");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const std::size_t max_field = std::size_t{1} << (data[0] % 17);
  const std::span<const std::uint8_t> frame(data + 1, size - 1);
  if (frame.size() < kFrameHeaderBytes) return 0;

  FrameHeader header{};
  try {
    header = decode_header(frame.data(), max_body_bytes(max_field));
  } catch (const Error& e) {
    require_invalid_argument(e, "decode_header");
    return 0;
  }
  FUZZ_REQUIRE(header.body_length <= max_body_bytes(max_field),
               "accepted a body of " + std::to_string(header.body_length) + " bytes");
  FUZZ_REQUIRE(std::string(message_type_name(header.type)) != "unknown",
               "accepted unknown type " + std::to_string(frame[5]));

  const std::uint64_t available = frame.size() - kFrameHeaderBytes;
  const bool complete = header.body_length <= available;
  const auto body = frame.subspan(
      kFrameHeaderBytes, static_cast<std::size_t>(std::min(header.body_length, available)));
  std::vector<std::span<const std::uint8_t>> fields;
  try {
    fields = read_fields(body, max_field);
  } catch (const Error& e) {
    require_invalid_argument(e, "FieldReader");
    return 0;
  }
  // Fields tile the body: each starts where the previous one's length prefix ends.
  std::size_t at = 0;
  for (const auto& f : fields) {
    FUZZ_REQUIRE(f.size() <= max_field, "a field of " + std::to_string(f.size()) +
                                            " bytes passed the limit of " +
                                            std::to_string(max_field));
    FUZZ_REQUIRE(f.data() == body.data() + at + 8, "a field does not follow its length prefix");
    FUZZ_REQUIRE(little_endian(body.subspan(at, 8)) == f.size(),
                 "a field's length differs from its prefix");
    at += 8 + f.size();
  }
  FUZZ_REQUIRE(at == body.size(), "the fields do not cover the body");

  if (complete)
    check_round_trip(header.type, frame.first(kFrameHeaderBytes + body.size()), fields, max_field);
  return 0;
}
