// The C ABI's option structs read into CollectiveOptions, field by field: what a caller built
// against each earlier layout of cohort_collective_options_t gets, and that bytes beyond its
// struct_size are never read (they are filled with a pattern a read would show).

#include <cohort/cohort.h>
#include <cohort/communicator.hpp>
#include <cohort/error.hpp>

#include "capi/options.hpp"

#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace {

using cohort::capi::collective_options;

// Every byte 0xA5 first (padding included), then every field set to a non-default value.
cohort_collective_options_t all_fields_set(std::size_t struct_size) {
  cohort_collective_options_t options;
  std::memset(&options, 0xA5, sizeof options);
  options.struct_size = struct_size;
  options.timeout_ms = 1500;
  options.algorithm = COHORT_ALGORITHM_RING;
  options.has_stream = 1;
  options.stream = 0xBEEF;
  return options;
}

}  // namespace

TEST_CASE("capi collective options: the current layout reads the stream", "[capi]") {
  const auto options = all_fields_set(sizeof(cohort_collective_options_t));
  const cohort::CollectiveOptions read = collective_options(&options, "test");
  REQUIRE(read.timeout == std::chrono::milliseconds(1500));
  REQUIRE(read.algorithm == cohort::Algorithm::Ring);
  REQUIRE(read.stream == cohort::Stream{0xBEEF});
}

TEST_CASE("capi collective options: stream 0 with has_stream is the legacy default stream",
          "[capi]") {
  auto options = all_fields_set(sizeof(cohort_collective_options_t));
  options.stream = 0;
  REQUIRE(collective_options(&options, "test").stream == cohort::Stream{0});
}

TEST_CASE("capi collective options: has_stream 0 means no stream, whatever stream holds",
          "[capi]") {
  auto options = all_fields_set(sizeof(cohort_collective_options_t));
  options.has_stream = 0;
  REQUIRE_FALSE(collective_options(&options, "test").stream.has_value());
}

TEST_CASE("capi collective options: the INIT macro and init function mean no stream", "[capi]") {
  const cohort_collective_options_t from_macro = COHORT_COLLECTIVE_OPTIONS_INIT;
  REQUIRE_FALSE(collective_options(&from_macro, "test").stream.has_value());
  cohort_collective_options_t from_function;
  std::memset(&from_function, 0xA5, sizeof from_function);
  REQUIRE(cohort_collective_options_init(&from_function) == COHORT_OK);
  REQUIRE_FALSE(collective_options(&from_function, "test").stream.has_value());
  REQUIRE_FALSE(collective_options(nullptr, "test").stream.has_value());
}

TEST_CASE("capi collective options: older layouts default the stream", "[capi]") {
  // The layout before the stream fields ended after `algorithm`; its sizeof, rounded up to the
  // struct's alignment, may already cover has_stream's offset (it lies in that tail padding),
  // which is why both fields are read only when `stream` fits.
  const std::size_t before_stream_fields =
      offsetof(cohort_collective_options_t, algorithm) + sizeof(std::int32_t);
  const std::size_t old_sizeof = (before_stream_fields + alignof(cohort_collective_options_t) - 1) /
                                 alignof(cohort_collective_options_t) *
                                 alignof(cohort_collective_options_t);
  for (const std::size_t size :
       {before_stream_fields, old_sizeof, offsetof(cohort_collective_options_t, stream),
        offsetof(cohort_collective_options_t, stream) + sizeof(uintptr_t) - 1}) {
    CAPTURE(size);
    const auto options = all_fields_set(size);
    const cohort::CollectiveOptions read = collective_options(&options, "test");
    REQUIRE(read.timeout == std::chrono::milliseconds(1500));
    REQUIRE(read.algorithm == cohort::Algorithm::Ring);
    REQUIRE_FALSE(read.stream.has_value());
  }
  // The oldest layout: only struct_size.
  const auto oldest = all_fields_set(sizeof(std::size_t));
  const cohort::CollectiveOptions read = collective_options(&oldest, "test");
  REQUIRE_FALSE(read.timeout.has_value());
  REQUIRE(read.algorithm == cohort::Algorithm::Auto);
  REQUIRE_FALSE(read.stream.has_value());
}

TEST_CASE("capi collective options: a newer, longer struct is accepted", "[capi]") {
  struct {
    cohort_collective_options_t known;
    std::uint64_t appended_later;
  } newer;
  newer.known = all_fields_set(sizeof newer);
  newer.appended_later = 7;
  REQUIRE(collective_options(&newer.known, "test").stream == cohort::Stream{0xBEEF});
}

TEST_CASE("capi options init: a caller's older, shorter struct is written no further than its end",
          "[capi]") {
  // A caller built before has_stream and stream were appended: its struct ends after
  // `algorithm` (rounded up to the alignment). The library's own sizeof is larger; it must write
  // only what the caller's size covers, or it overruns the caller's stack.
  const std::size_t old_sizeof = (offsetof(cohort_collective_options_t, algorithm) +
                                  sizeof(std::int32_t) + alignof(cohort_collective_options_t) - 1) /
                                 alignof(cohort_collective_options_t) *
                                 alignof(cohort_collective_options_t);
  REQUIRE(old_sizeof < sizeof(cohort_collective_options_t));
  alignas(cohort_collective_options_t) unsigned char memory[64];
  std::memset(memory, 0xA5, sizeof memory);
  auto* options = reinterpret_cast<cohort_collective_options_t*>(memory);
  REQUIRE(cohort_collective_options_init_sized(options, old_sizeof) == COHORT_OK);
  for (std::size_t i = old_sizeof; i < sizeof memory; ++i) {
    CAPTURE(i);
    REQUIRE(memory[i] == 0xA5);
  }
  REQUIRE(options->struct_size == old_sizeof);
  REQUIRE(options->timeout_ms == 0);
  REQUIRE(options->algorithm == COHORT_ALGORITHM_AUTO);
  const cohort::CollectiveOptions read = collective_options(options, "test");
  REQUIRE_FALSE(read.timeout.has_value());
  REQUIRE_FALSE(read.stream.has_value());
}

TEST_CASE("capi options init: a newer, longer struct gets the known defaults and a zero tail",
          "[capi]") {
  // A caller built against a later header than this library: its struct_size must then say only
  // what the library wrote, so that the fields it does not know are read as absent (not as
  // whatever its stack held) should it run against a newer library later.
  struct {
    cohort_init_options_t known;
    std::uint64_t appended_later;
  } newer;
  std::memset(&newer, 0xA5, sizeof newer);
  REQUIRE(cohort_init_options_init_sized(&newer.known, sizeof newer) == COHORT_OK);
  REQUIRE(newer.known.struct_size == sizeof(cohort_init_options_t));
  REQUIRE(newer.known.timeout_ms == 0);
  REQUIRE(newer.appended_later == 0);
}

TEST_CASE("capi options init: the inline form passes the caller's sizeof; bad sizes are refused",
          "[capi]") {
  cohort_collective_options_t options;
  std::memset(&options, 0xA5, sizeof options);
  REQUIRE(cohort_collective_options_init(&options) == COHORT_OK);
  REQUIRE(options.struct_size == sizeof options);
  REQUIRE(options.has_stream == 0);
  REQUIRE(options.stream == 0);
  REQUIRE(cohort_collective_options_init_sized(&options, 3) == COHORT_ERROR_INVALID_ARGUMENT);
  REQUIRE(std::string(cohort_last_error_message()).find("struct_size 3") != std::string::npos);
  REQUIRE(cohort_init_options_init_sized(nullptr, sizeof(cohort_init_options_t)) ==
          COHORT_ERROR_INVALID_ARGUMENT);
}
