#pragma once

// The small framing format the training layer's control messages use (RngStateSync's plan,
// broadcast_buffer's header, the status frames of the object collectives): fixed-width integers
// and length-prefixed texts, appended to a byte vector and read back in the same order.
//
// Integers travel in native byte order: every rank of a job runs on the same architecture, as the
// rest of cohort's host path already assumes. The reader bounds every read and every length by
// the bytes it was given, so a corrupt frame throws Internal instead of over-reading or
// allocating what a length claims.

#include <cohort/error.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cohort::train {

class ByteWriter {
 public:
  void u8(std::uint8_t v) { bytes_.push_back(std::byte{v}); }
  void u64(std::uint64_t v) { append(&v, sizeof v); }
  void text(std::string_view s) {
    u64(s.size());
    append(s.data(), s.size());
  }
  std::vector<std::byte> take() { return std::move(bytes_); }

 private:
  void append(const void* data, std::size_t n) {
    const auto* first = static_cast<const std::byte*>(data);
    bytes_.insert(bytes_.end(), first, first + n);
  }
  std::vector<std::byte> bytes_;
};

class ByteReader {
 public:
  /// `what` names the frame in errors ("RngStateSync::synchronize: the root's plan").
  ByteReader(std::span<const std::byte> bytes, std::string what)
      : bytes_(bytes), what_(std::move(what)) {}

  std::uint8_t u8() {
    std::uint8_t v = 0;
    copy(&v, sizeof v);
    return v;
  }
  std::uint64_t u64() {
    std::uint64_t v = 0;
    copy(&v, sizeof v);
    return v;
  }
  std::string text() {
    std::string s(checked_length(u64()), '\0');
    copy(s.data(), s.size());
    return s;
  }
  bool done() const { return offset_ == bytes_.size(); }

 private:
  // Bounds a length read from the stream before anything is allocated for it.
  std::size_t checked_length(std::uint64_t n) const {
    if (n > bytes_.size() - offset_) truncated();
    return static_cast<std::size_t>(n);
  }
  void copy(void* out, std::size_t n) {
    if (n > bytes_.size() - offset_) truncated();
    if (n > 0) std::memcpy(out, bytes_.data() + offset_, n);
    offset_ += n;
  }
  [[noreturn]] void truncated() const {
    throw Error(ErrorCode::Internal, what_ + " is truncated at byte " + std::to_string(offset_) +
                                         " of " + std::to_string(bytes_.size()));
  }
  std::span<const std::byte> bytes_;
  std::string what_;
  std::size_t offset_ = 0;
};

}  // namespace cohort::train
