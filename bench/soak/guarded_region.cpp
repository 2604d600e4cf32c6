#include "guarded_region.hpp"

#include <cstring>

namespace cohort::soak {

GuardedRegion::GuardedRegion(std::size_t count, DType dtype, unsigned misalign)
    : offset_(kGuardBytes + misalign * dtype_size(dtype)),
      count_(count),
      dtype_(dtype),
      allocated_(true) {
  const std::size_t payload = count * dtype_size(dtype);
  // Buffer::allocate is 64-byte aligned, so the payload's alignment is set by offset_ alone.
  storage_ = Buffer::allocate(offset_ + payload + kGuardBytes, DType::UInt8);
  auto* bytes = storage_.data_as<std::uint8_t>();
  std::memset(bytes, kGuardByte, offset_);
  std::memset(bytes + offset_, kPoisonByte, payload);
  std::memset(bytes + offset_ + payload, kGuardByte, kGuardBytes);
}

void* GuardedRegion::data(std::size_t first) const noexcept {
  if (!allocated_) return nullptr;
  return storage_.data_as<std::uint8_t>() + offset_ + first * dtype_size(dtype_);
}

Buffer GuardedRegion::view() const {
  return view(0, count_);
}

Buffer GuardedRegion::view(std::size_t first, std::size_t count) const {
  if (!allocated_) return Buffer();
  return Buffer::view(data(first), count, dtype_);
}

std::string GuardedRegion::damaged_guard() const {
  if (!allocated_) return {};
  const auto* bytes = storage_.data_as<std::uint8_t>();
  const std::size_t payload_end = offset_ + count_ * dtype_size(dtype_);
  for (std::size_t i = 0; i < offset_; ++i) {
    if (bytes[i] != kGuardByte)
      return "byte " + std::to_string(offset_ - i) + " before the buffer was overwritten";
  }
  for (std::size_t i = 0; i < kGuardBytes; ++i) {
    if (bytes[payload_end + i] != kGuardByte)
      return "byte " + std::to_string(i) + " after the buffer's end was overwritten";
  }
  return {};
}

}  // namespace cohort::soak
