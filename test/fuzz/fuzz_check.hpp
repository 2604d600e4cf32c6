#pragma once

// What every harness in test/fuzz shares: an invariant check that aborts (libFuzzer then saves the
// input and prints the stack), a reader that turns the fuzzer's bytes into typed fields, and the
// one accepted way for the code under test to refuse input: cohort::Error(InvalidArgument).

#include <cohort/error.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>
#include <string_view>

// Not assert(): the harnesses are built with NDEBUG in release-like builds, and an invariant must
// hold in every build.
#define FUZZ_REQUIRE(cond, detail)                                                           \
  do {                                                                                       \
    if (!(cond)) {                                                                           \
      std::fprintf(stderr, "%s:%d: invariant failed: %s -- %s\n", __FILE__, __LINE__, #cond, \
                   std::string(detail).c_str());                                             \
      std::abort();                                                                          \
    }                                                                                        \
  } while (0)

namespace cohort::fuzz {

/// Reads little-endian integers and byte runs off the front of the input; past the end it yields
/// zeros and empty runs, so a short input is still a complete (if dull) case.
class ByteReader {
 public:
  ByteReader(const std::uint8_t* data, std::size_t size) : bytes_(data, size) {}

  std::uint64_t uint(std::size_t width) {
    std::uint64_t value = 0;
    for (std::size_t i = 0; i < width; ++i) {
      const std::uint64_t byte = offset_ < bytes_.size() ? bytes_[offset_] : 0;
      ++offset_;
      value |= byte << (8 * i);
    }
    return value;
  }
  std::uint8_t u8() { return static_cast<std::uint8_t>(uint(1)); }
  std::uint16_t u16() { return static_cast<std::uint16_t>(uint(2)); }
  std::uint32_t u32() { return static_cast<std::uint32_t>(uint(4)); }
  std::uint64_t u64() { return uint(8); }
  std::int64_t i64() { return static_cast<std::int64_t>(uint(8)); }

  /// Up to `count` bytes (fewer at the end of the input).
  std::span<const std::uint8_t> take(std::size_t count) {
    const std::size_t start = offset_ < bytes_.size() ? offset_ : bytes_.size();
    const std::size_t n = count < bytes_.size() - start ? count : bytes_.size() - start;
    offset_ = start + n;
    return bytes_.subspan(start, n);
  }
  /// Everything not read yet.
  std::span<const std::uint8_t> rest() { return take(bytes_.size()); }
  bool empty() const { return offset_ >= bytes_.size(); }

 private:
  std::span<const std::uint8_t> bytes_;
  std::size_t offset_ = 0;
};

/// The text before the first NUL: what an environment variable can hold.
inline std::string env_text(std::span<const std::uint8_t> bytes) {
  if (bytes.empty()) return {};
  const auto* chars = reinterpret_cast<const char*>(bytes.data());
  return std::string(chars, strnlen(chars, bytes.size()));
}

/// Requires `e` to be the refusal every parser promises: InvalidArgument, with a message.
inline void require_invalid_argument(const Error& e, std::string_view where) {
  FUZZ_REQUIRE(
      e.code() == ErrorCode::InvalidArgument,
      std::string(where) + " threw " + std::string(error_code_name(e.code())) + ": " + e.what());
  FUZZ_REQUIRE(!e.message().empty(), std::string(where) + " threw an error without a message");
}

}  // namespace cohort::fuzz
