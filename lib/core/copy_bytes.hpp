#pragma once

// memcpy/memmove with the empty case defined. Collectives routinely copy empty blocks (count 0,
// a rank with no data in a v-collective) whose pointers may be null, and passing null to memcpy
// is undefined even for zero bytes (UBSan reports it).

#include <cstddef>
#include <cstring>

namespace cohort {

inline void copy_bytes(void* dst, const void* src, std::size_t bytes) noexcept {
  if (bytes != 0) std::memcpy(dst, src, bytes);
}

/// As copy_bytes, for ranges that may overlap.
inline void move_bytes(void* dst, const void* src, std::size_t bytes) noexcept {
  if (bytes != 0) std::memmove(dst, src, bytes);
}

}  // namespace cohort
