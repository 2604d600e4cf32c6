#pragma once

// A binding converts a rank's Python arguments before it calls a collective C++ helper. When
// that conversion fails on one rank only, the other ranks are already inside the helper's
// exchange, where the C++ layer carries each rank's verdict on its arguments: the failing rank
// must enter that exchange too, as a rank that refused its arguments, or the others wait out
// their timeout. It does so by calling the helper with arguments the helper itself refuses.

#include <pybind11/pybind11.h>

#include <exception>
#include <utility>

namespace cohort::python {

/// `convert()` (this rank's arguments, with the GIL held); if it throws, `join_refusing()` runs
/// without the GIL (the C++ helper with arguments it refuses, entering its exchange as a refusing
/// rank; its own error is swallowed), then convert's exception is rethrown.
template <class Convert, class Join>
auto converted_or_joined(Convert&& convert, Join&& join_refusing) -> decltype(convert()) {
  try {
    return convert();
  } catch (...) {
    {
      pybind11::gil_scoped_release release;
      try {
        join_refusing();
      } catch (const std::exception&) {  // its refusal, or the exchange's own failure
      }
    }
    throw;
  }
}

}  // namespace cohort::python
