#pragma once

// Reading a C enum from a C caller.

#include <cstring>
#include <type_traits>

namespace cohort::capi {

/// The integer a C caller stored in an enum-typed field or parameter, read as bytes. C lets a
/// caller store any int in a C enum; in C++ merely loading an out-of-range value through the
/// enum type is undefined (UBSan's -fsanitize=enum flags it), so every enum crossing the ABI is
/// read through this before it is range-checked.
template <class Enum>
int enum_bits(const Enum& value) {
  std::underlying_type_t<Enum> bits;
  static_assert(sizeof bits == sizeof value);
  std::memcpy(&bits, &value, sizeof bits);
  return static_cast<int>(bits);
}

}  // namespace cohort::capi
