// The exported forms of cohort.h's inline option initialisers, for programs built against a
// header where they were not inline and for FFI callers (ctypes, cffi's ABI mode), which cannot
// call an inline function. This file must see the header without its inline definitions, so it is
// compiled on its own, never in a unity build's shared translation unit (lib/capi/meson.build).

#define COHORT_BUILDING_LIBRARY 1

#include <cohort/cohort.h>

#include <cstddef>
#include <cstdint>

namespace {

// The layout cohort_collective_options_init first wrote (up to `algorithm`, rounded to the
// struct's alignment): what a program calling the exported symbol has room for.
constexpr std::size_t kFirstCollectiveOptionsSize =
    (offsetof(cohort_collective_options_t, algorithm) + sizeof(std::int32_t) +
     alignof(cohort_collective_options_t) - 1) /
    alignof(cohort_collective_options_t) * alignof(cohort_collective_options_t);

}  // namespace

extern "C" {

COHORT_API cohort_status_t cohort_init_options_init(cohort_init_options_t* options) {
  return cohort_init_options_init_sized(options, sizeof(cohort_init_options_t));
}

COHORT_API cohort_status_t cohort_collective_options_init(cohort_collective_options_t* options) {
  return cohort_collective_options_init_sized(options, kFirstCollectiveOptionsSize);
}

}  // extern "C"
