// Size parsing (K/M/G as powers of 1024) and sweep construction (-b/-e with -f or -i).

#include "size_sweep.hpp"

#include <cohort/error.hpp>

#include <catch2/catch.hpp>

#include <string>

using namespace cohort;
using namespace cohort::bench;
using Sizes = std::vector<std::uint64_t>;

namespace {

// The InvalidArgument message of `fn`, or "" when it did not throw one.
template <class Fn>
std::string invalid_argument_message(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    if (e.code() == ErrorCode::InvalidArgument) return e.message();
    return "wrong code: " + std::string(e.what());
  }
  return "";
}

}  // namespace

TEST_CASE("parse_size reads digits with K, M, G suffixes", "[bench][sweep]") {
  CHECK(parse_size("0") == 0);
  CHECK(parse_size("8") == 8);
  CHECK(parse_size("1K") == 1024);
  CHECK(parse_size("1k") == 1024);
  CHECK(parse_size("64M") == 64ull * 1024 * 1024);
  CHECK(parse_size("3m") == 3ull << 20);
  CHECK(parse_size("2G") == 2ull << 30);
  CHECK(parse_size("1048576") == 1048576);
  CHECK(parse_size("17179869183G") == 17179869183ull << 30);  // just below 2^64
}

TEST_CASE("parse_size rejects malformed and overflowing sizes, naming them", "[bench][sweep]") {
  for (const char* text : {"", "K", "1.5M", "12X", "-1", "1KB", " 8", "0x10", "M1"}) {
    INFO("text '" << text << "'");
    const std::string message = invalid_argument_message([&] { parse_size(text, "--minbytes"); });
    CHECK_FALSE(message.empty());
    CHECK(message.find("--minbytes") != std::string::npos);
  }
  CHECK(invalid_argument_message([] { parse_size("12X"); }).find("'12X'") != std::string::npos);
  CHECK_FALSE(invalid_argument_message([] { parse_size("18446744073709551616"); }).empty());
  CHECK(parse_size("18446744073709551615") == 18446744073709551615ull);
  CHECK_FALSE(invalid_argument_message([] { parse_size("17179869184G"); }).empty());
}

TEST_CASE("factor sweeps multiply up to and including max", "[bench][sweep]") {
  CHECK(make_sweep({8, 64, 2, 0}) == Sizes{8, 16, 32, 64});
  CHECK(make_sweep({8, 100, 2, 0}) == Sizes{8, 16, 32, 64});
  CHECK(make_sweep({8, 128, 4, 0}) == Sizes{8, 32, 128});
  CHECK(make_sweep({1024, 1024, 2, 0}) == Sizes{1024});
  CHECK(make_sweep({0, 0, 2, 0}) == Sizes{0});
  // The nccl-tests default: 8 B to 64 MiB doubling is 24 sizes.
  const Sizes defaults = make_sweep(SweepSpec{});
  CHECK(defaults.size() == 24);
  CHECK(defaults.front() == 8);
  CHECK(defaults.back() == 64ull << 20);
  // Near the top of the range the sweep stops instead of overflowing.
  const Sizes top = make_sweep({1ull << 62, ~0ull, 2, 0});
  CHECK(top == Sizes{1ull << 62, 1ull << 63});
}

TEST_CASE("step sweeps add bytes and ignore the factor", "[bench][sweep]") {
  CHECK(make_sweep({0, 10, 2, 4}) == Sizes{0, 4, 8});
  CHECK(make_sweep({1000, 4000, 1, 1000}) == Sizes{1000, 2000, 3000, 4000});
  CHECK(make_sweep({5, 5, 0, 1}) == Sizes{5});
  CHECK(make_sweep({~0ull - 1, ~0ull, 2, 7}) == Sizes{~0ull - 1});
}

TEST_CASE("bad sweeps are rejected with the offending values", "[bench][sweep]") {
  const std::string min_over_max = invalid_argument_message([] { make_sweep({2048, 1024, 2, 0}); });
  CHECK(min_over_max.find("2048") != std::string::npos);
  CHECK(min_over_max.find("1024") != std::string::npos);
  CHECK(invalid_argument_message([] {
          make_sweep({8, 64, 1, 0});
        }).find("stepfactor 1") != std::string::npos);
  CHECK_FALSE(invalid_argument_message([] { make_sweep({8, 64, 0, 0}); }).empty());
  CHECK_FALSE(invalid_argument_message([] { make_sweep({0, 64, 2, 0}); }).empty());
  CHECK_FALSE(invalid_argument_message([] { make_sweep({0, 1ull << 30, 2, 1}); }).empty());
  CHECK(make_sweep({1, kMaxSweepSizes, 2, 1}).size() == kMaxSweepSizes);
}
