#pragma once

// Helpers for communicator tests that run inside cohort::launch() children. A child cannot use
// Catch2 assertions (its results die with it), so checks throw std::runtime_error with the
// location and the values; launch() then fails naming the rank, and the parent's REQUIRE fails.

#include <cohort/buffer.hpp>
#include <cohort/communicator.hpp>
#include <cohort/error.hpp>
#include <cohort/launch.hpp>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>

namespace cohort::test {

#define RANK_CHECK(cond, detail)                                                                   \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      std::ostringstream rank_check_text;                                                          \
      rank_check_text << __FILE__ << ":" << __LINE__ << ": check failed: " #cond " -- " << detail; \
      throw std::runtime_error(rank_check_text.str());                                             \
    }                                                                                              \
  } while (0)

/// The world communicator of a launch() child, over the launcher's store.
inline std::shared_ptr<Communicator> world(const Environment& env,
                                           const CommunicatorOptions& options = {}) {
  return Communicator::create(env, connect_store(env), options);
}

/// Runs fn on `size` ranks with a whole-job deadline so a bug cannot hang the suite.
inline void run_ranks(int size, const std::function<void(const Environment&)>& fn,
                      std::chrono::seconds limit = std::chrono::seconds(90)) {
  LaunchOptions options;
  options.timeout = limit;
  options.grace = std::chrono::seconds(5);
  launch(size, fn, options);
}

/// Calls fn, requires an Error with `code` whose message contains every one of `needles`, and
/// returns it (for checks of its context).
inline Error caught_error(const std::function<void()>& fn, ErrorCode code,
                          std::initializer_list<std::string_view> needles, const char* where) {
  try {
    fn();
  } catch (const Error& e) {
    RANK_CHECK(e.code() == code,
               where << ": expected " << error_code_name(code) << ", got " << e.what());
    for (std::string_view needle : needles) {
      RANK_CHECK(e.message().find(needle) != std::string::npos,
                 where << ": message lacks '" << needle << "': " << e.what());
    }
    return e;
  }
  throw std::runtime_error(std::string(where) + ": no error thrown");
}

/// caught_error without the error.
inline void expect_error(const std::function<void()>& fn, ErrorCode code,
                         std::initializer_list<std::string_view> needles, const char* where) {
  caught_error(fn, code, needles, where);
}

/// Requires `e` to name its op by fields (ErrorContext): the bare name `op`, number `sequence`
/// on communicator `communicator`, never a label such as "recv #3 from rank 1 (tag 7)".
inline void expect_op(const Error& e, std::string_view op, std::optional<std::uint32_t> sequence,
                      std::uint32_t communicator, const char* where) {
  const ErrorContext& context = e.context();
  RANK_CHECK(context.op == op,
             where << ": context op '" << context.op << "', expected '" << op << "': " << e.what());
  RANK_CHECK(context.sequence == sequence,
             where << ": context sequence "
                   << (context.sequence ? std::to_string(*context.sequence) : "none")
                   << ", expected " << (sequence ? std::to_string(*sequence) : "none"));
  RANK_CHECK(context.communicator == communicator,
             where << ": context communicator "
                   << (context.communicator ? std::to_string(*context.communicator) : "none"));
}

// Typed access through double for the dtypes these tests use (all values are small integers
// or simple fractions, exact in every one of them).
inline double get(const Buffer& b, std::size_t i) {
  switch (b.dtype()) {
    case DType::Float32: return b.data_as<float>()[i];
    case DType::Float64: return b.data_as<double>()[i];
    case DType::Int32: return b.data_as<std::int32_t>()[i];
    case DType::Int64: return static_cast<double>(b.data_as<std::int64_t>()[i]);
    case DType::Int8: return b.data_as<std::int8_t>()[i];
    default: throw std::runtime_error("test helper: unsupported dtype");
  }
}

inline void set(const Buffer& b, std::size_t i, double v) {
  switch (b.dtype()) {
    case DType::Float32: b.data_as<float>()[i] = static_cast<float>(v); return;
    case DType::Float64: b.data_as<double>()[i] = v; return;
    case DType::Int32: b.data_as<std::int32_t>()[i] = static_cast<std::int32_t>(v); return;
    case DType::Int64: b.data_as<std::int64_t>()[i] = static_cast<std::int64_t>(v); return;
    case DType::Int8: b.data_as<std::int8_t>()[i] = static_cast<std::int8_t>(v); return;
    default: throw std::runtime_error("test helper: unsupported dtype");
  }
}

/// Requires b[offset + i] == expected(i) for i < count (floats within 1e-5 relative).
template <class F>
void expect_values(const Buffer& b, std::size_t offset, std::size_t count, F expected,
                   const std::string& what) {
  const bool floating = b.dtype() == DType::Float32 || b.dtype() == DType::Float64;
  for (std::size_t i = 0; i < count; ++i) {
    const double got = get(b, offset + i);
    const double want = expected(i);
    const bool ok =
        floating ? std::fabs(got - want) <= 1e-5 * std::max(1.0, std::fabs(want)) : got == want;
    RANK_CHECK(ok, what << ": element " << i << " is " << got << ", expected " << want);
  }
}

}  // namespace cohort::test
