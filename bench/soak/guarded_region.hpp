#pragma once

// A host allocation whose payload is surrounded by guard bytes, so a collective that writes past
// either end of the buffer it was given is caught, not just one that writes wrong values. The
// payload may start a few elements past a 64-byte boundary, to drive the kernels' unaligned paths.

#include <cohort/buffer.hpp>

#include <cstddef>
#include <cstdint>
#include <string>

namespace cohort::soak {

class GuardedRegion {
 public:
  /// Guard bytes on each side of the payload.
  static constexpr std::size_t kGuardBytes = 64;
  static constexpr std::uint8_t kGuardByte = 0xCD;
  /// What an output holds before the op: never a value a correct op could leave there by
  /// accident for Bool (it must write 0 or 1) and unlikely for any other dtype.
  static constexpr std::uint8_t kPoisonByte = 0xA5;

  /// No allocation: view() is an empty Buffer.
  GuardedRegion() = default;
  /// `count` elements of `dtype`, starting `misalign` elements past a 64-byte boundary, filled
  /// with kPoisonByte.
  GuardedRegion(std::size_t count, DType dtype, unsigned misalign);

  bool allocated() const noexcept { return allocated_; }
  std::size_t count() const noexcept { return count_; }
  DType dtype() const noexcept { return dtype_; }
  /// The payload, or elements [first, first + count) of it.
  void* data(std::size_t first = 0) const noexcept;
  Buffer view() const;
  Buffer view(std::size_t first, std::size_t count) const;

  /// Empty when every guard byte is intact; else where the first overwritten one is.
  std::string damaged_guard() const;

 private:
  Buffer storage_;
  std::size_t offset_ = 0;  // bytes from the storage's start to the payload
  std::size_t count_ = 0;
  DType dtype_ = DType::UInt8;
  bool allocated_ = false;
};

}  // namespace cohort::soak
